package queuerun_test

import (
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
