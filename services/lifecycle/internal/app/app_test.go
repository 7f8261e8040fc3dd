package app

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/config"
)

// Lifecycle reads and checks the BOARDREADYOPS_RETENTION_* settings with its own.
func TestRetentionSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env     map[string]string
		wantErr string
		enabled bool
		jobs    time.Duration
	}{
		{nil, "", true, 7 * 24 * time.Hour},
		{map[string]string{"BOARDREADYOPS_RETENTION_ENABLED": "false"}, "", false, 7 * 24 * time.Hour},
		{map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "2m", "BOARDREADYOPS_RETENTION_ALLOW_SHORT": "true"}, "", true, 2 * time.Minute},
		{map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "2m"}, "BOARDREADYOPS_RETENTION_ALLOW_SHORT", true, 0},
		// The replay window: never under GitHub's redelivery window; shorter than the jobs period
		// (or beside a jobs period of never) it is raised, so an upgrade never stops lifecycle.
		{map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "48h", "BOARDREADYOPS_RETENTION_JOBS": "48h", "BOARDREADYOPS_RETENTION_ALLOW_SHORT": "false"},
			"BOARDREADYOPS_RETENTION_DIGESTS 48h0m0s is shorter than GitHub's redelivery window", true, 0},
		{map[string]string{"BOARDREADYOPS_RETENTION_DIGESTS": "96h"}, "", true, 7 * 24 * time.Hour},
		{map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "0"}, "", true, 0},
		{map[string]string{"BOARDREADYOPS_RETENTION_JOBS": "0", "BOARDREADYOPS_RETENTION_DIGESTS": "0"}, "", true, 0},
	}
	for _, tt := range tests {
		var c Config
		e := config.NewEnv(flag.NewFlagSet("lifecycle", flag.ContinueOnError), func(k string) string { return tt.env[k] })
		c.register(e)
		if err := e.Parse(nil); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: %v, want an error naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.Retention.Enabled != tt.enabled || c.Retention.Periods.Jobs != tt.jobs {
			t.Errorf("%v: %+v %v", tt.env, c.Retention, err)
		}
	}
}

// The release-run thresholds are checked at startup, before the database, under their variables'
// names (the worker would default a 0 and refuse a small value only once connected). The README
// documents no 0 for either, so 0 is refused as well.
func TestReleaseRunThresholds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env      map[string]string
		wantErr  string
		stale    time.Duration
		readBack time.Duration
	}{
		{nil, "", time.Hour, 30 * time.Minute},
		{map[string]string{"BOARDREADYOPS_RELEASE_RUN_STALE_AFTER": "1m", "BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER": "5m"}, "", time.Minute, 5 * time.Minute},
		{map[string]string{"BOARDREADYOPS_RELEASE_RUN_STALE_AFTER": "59s"}, "BOARDREADYOPS_RELEASE_RUN_STALE_AFTER 59s: want at least 1m", 0, 0},
		{map[string]string{"BOARDREADYOPS_RELEASE_RUN_STALE_AFTER": "0"}, "BOARDREADYOPS_RELEASE_RUN_STALE_AFTER 0s: want at least 1m", 0, 0},
		{map[string]string{"BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER": "4m"}, "BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER 4m0s: want at least 5m", 0, 0},
		{map[string]string{"BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER": "0"}, "BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER 0s: want at least 5m", 0, 0},
		{map[string]string{"BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER": "-1h"}, "BOARDREADYOPS_RELEASE_RUN_READ_BACK_AFTER -1h0m0s: want at least 5m", 0, 0},
	}
	for _, tt := range tests {
		var c Config
		e := config.NewEnv(flag.NewFlagSet("lifecycle", flag.ContinueOnError), func(k string) string { return tt.env[k] })
		c.register(e)
		if err := e.Parse(nil); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: %v, want an error containing %q", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.Worker.StaleAfter != tt.stale || c.Worker.ReadBackAfter != tt.readBack {
			t.Errorf("%v: stale after %v, read back after %v, %v", tt.env, c.Worker.StaleAfter, c.Worker.ReadBackAfter, err)
		}
	}
}
