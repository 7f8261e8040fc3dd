package config_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/config"
)

func TestCommon(t *testing.T) {
	t.Parallel()
	defaults := config.Process{MetricsAddr: ":9090", LogLevel: "info", LogFormat: "json", ShutdownTimeout: 25 * time.Second}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    config.Common
		wantErr string
	}{
		{
			name: "defaults with database from env",
			env:  map[string]string{"DATABASE_URL": "postgres://x/y"},
			want: config.Common{DatabaseURL: "postgres://x/y", DBMaxConns: 10, Process: defaults},
		},
		{
			name: "flags win over env",
			env:  map[string]string{"DATABASE_URL": "postgres://env/db", "METRICS_ADDR": ":1"},
			args: []string{"--database-url", "postgres://flag/db", "--metrics-addr", ":2", "--db-max-conns", "4"},
			want: config.Common{DatabaseURL: "postgres://flag/db", DBMaxConns: 4,
				Process: config.Process{MetricsAddr: ":2", LogLevel: "info", LogFormat: "json", ShutdownTimeout: 25 * time.Second}},
		},
		{
			// DATABASE_URL is read after parsing (usage output must not show it): a flag still
			// wins, even an empty one.
			name:    "an empty flag wins over env",
			env:     map[string]string{"DATABASE_URL": "postgres://env/db"},
			args:    []string{"--database-url", ""},
			wantErr: "DATABASE_URL (or --database-url) is required",
		},
		{
			name:    "every malformed value is reported",
			env:     map[string]string{"BOARDREADYOPS_DB_MAX_CONNS": "ten", "BOARDREADYOPS_SHUTDOWN_TIMEOUT": "soon"},
			wantErr: "BOARDREADYOPS_DB_MAX_CONNS=\"ten\": not an integer\nBOARDREADYOPS_SHUTDOWN_TIMEOUT=\"soon\": not a duration",
		},
		{
			name:    "missing database and bad level",
			env:     map[string]string{"LOG_LEVEL": "loud"},
			wantErr: "DATABASE_URL (or --database-url) is required\nLOG_LEVEL \"loud\"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			e := config.NewEnv(fs, func(k string) string { return tt.env[k] })
			var c config.Common
			c.Register(e)
			err := e.Parse(tt.args)
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c != tt.want {
				t.Fatalf("got %+v, want %+v", c, tt.want)
			}
		})
	}
}
