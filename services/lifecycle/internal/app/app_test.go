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
