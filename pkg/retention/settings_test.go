package retention_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/config"
	"github.com/boardreadyops/cloud/pkg/retention"
)

// digestsAre checks the digests period in force after Validate.
func digestsAre(want time.Duration) func(*testing.T, retention.Settings) {
	return func(t *testing.T, s retention.Settings) {
		t.Helper()
		if s.Periods.Digests != want {
			t.Errorf("digests period %v, want %v", s.Periods.Digests, want)
		}
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, s retention.Settings)
	}{
		{"defaults", nil, "", func(t *testing.T, s retention.Settings) {
			want := retention.Periods{Jobs: 7 * 24 * time.Hour, Digests: 30 * 24 * time.Hour, Effects: 7 * 24 * time.Hour, ReleaseRuns: 90 * 24 * time.Hour}
			if !s.Enabled || s.Periods != want || s.BatchSize != 1000 || s.Interval != 5*time.Minute || s.Lease != 30*time.Second {
				t.Errorf("defaults %+v", s)
			}
		}},
		{"short jobs period refused", map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "1h"}, "redelivery window", nil},
		{"short jobs period allowed for load tests", map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "30s", "BOARDREADYOPS_RETENTION_ALLOW_SHORT": "true"}, "", nil},
		{"digests period under the redelivery window refused", map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "48h", "BOARDREADYOPS_RETENTION_JOBS": "24h",
			"BOARDREADYOPS_RETENTION_ALLOW_SHORT": ""}, "BOARDREADYOPS_RETENTION_DIGESTS 48h0m0s is shorter than GitHub's redelivery window", nil},
		{"digests period shorter than the jobs period raised to it", map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "100h"}, "", digestsAre(168 * time.Hour)},
		{"digests period shorter than the jobs period raised for load tests too", map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "30s",
			"BOARDREADYOPS_RETENTION_JOBS": "2m", "BOARDREADYOPS_RETENTION_ALLOW_SHORT": "true"}, "", digestsAre(2 * time.Minute)},
		{"digests follow jobs kept forever", map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "0"}, "", digestsAre(0)},
		{"digests follow a longer jobs period", map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "2160h"}, "", digestsAre(2160 * time.Hour)},
		{"digests and jobs kept forever", map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "0", "BOARDREADYOPS_RETENTION_DIGESTS": "0"}, "", nil},
		{"digests never with jobs on", map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "0"}, "", nil},
		{"digests equal to the jobs period", map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "168h"}, "", nil},
		{"short digests period allowed for load tests", map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "2m", "BOARDREADYOPS_RETENTION_JOBS": "2m",
			"BOARDREADYOPS_RETENTION_ALLOW_SHORT": "true"}, "", nil},
		{"audit on", map[string]string{"BOARDREADYOPS_RETENTION_AUDIT": "8760h"}, "", func(t *testing.T, s retention.Settings) {
			if s.Periods.Audit != 8760*time.Hour {
				t.Errorf("audit %v", s.Periods.Audit)
			}
		}},
		{"audit under a year", map[string]string{"BOARDREADYOPS_RETENTION_AUDIT": "720h"}, "365 days", nil},
		{"sub-second period", map[string]string{"BOARDREADYOPS_RETENTION_EFFECTS": "10ms"}, "BOARDREADYOPS_RETENTION_EFFECTS", nil},
		{"batch too large", map[string]string{"BOARDREADYOPS_RETENTION_BATCH_SIZE": "20000"}, "BATCH_SIZE", nil},
		{"lease too short", map[string]string{"BOARDREADYOPS_RETENTION_LEASE": "100ms"}, "LEASE", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s retention.Settings
			e := config.NewEnv(flag.NewFlagSet("test", flag.ContinueOnError), func(k string) string { return tt.env[k] })
			s.Register(e)
			if err := e.Parse(nil); err != nil {
				t.Fatal(err)
			}
			err := s.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("validate: %v, want %q", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}
