package testkit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServicesDoNotImportTestkit fails when a service binary (not its tests) depends on a testkit
// package: test helpers start servers and hold simulator state that production code must never
// carry.
func TestServicesDoNotImportTestkit(t *testing.T) {
	t.Parallel()
	services := []string{"ingest", "lifecycle", "outbox-dispatcher", "operator", "brops"}
	for _, s := range services {
		out, err := exec.Command("go", "list", "-deps", "github.com/boardreadyops/cloud/services/"+s).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", s, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/boardreadyops/cloud/pkg/testkit") {
				t.Errorf("service %s depends on %s", s, dep)
			}
		}
	}
}
