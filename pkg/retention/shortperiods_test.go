package retention_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// Short jobs or digests periods (AllowShort) are refused at start to a login the database would
// refuse them to on every pass (migration 00074): a lifecycle login, not a clock login. Otherwise
// lifecycle started, and every pass failed at its first table, so that nothing was deleted.
func TestCheckShortAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	lifecycle := pgtest.NewLoginPool(t, url, "boardreadyops_lifecycle")
	clock := pgtest.NewLoginPool(t, url, "boardreadyops_lifecycle", "boardreadyops_clock")
	short := retention.Settings{AllowShort: true, Periods: retention.Periods{Jobs: 2 * time.Minute, Digests: 2 * time.Minute}}
	shortDigests := retention.Settings{AllowShort: true, Periods: retention.Periods{Jobs: 0, Digests: time.Hour}}
	safe := retention.Settings{Periods: retention.Periods{Jobs: 72 * time.Hour, Digests: 720 * time.Hour}}
	for _, tc := range []struct {
		name    string
		login   string
		s       retention.Settings
		refused bool
	}{
		{"short, lifecycle login", "lifecycle", short, true},
		{"short digests only, lifecycle login", "lifecycle", shortDigests, true},
		{"short, clock login", "clock", short, false},
		{"safe, lifecycle login", "lifecycle", safe, false},
	} {
		db := lifecycle
		if tc.login == "clock" {
			db = clock
		}
		err := retention.CheckShortAllowed(ctx, db, tc.s)
		if errors.Is(err, retention.ErrShortNotAllowed) != tc.refused || (err != nil && !tc.refused) {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
}
