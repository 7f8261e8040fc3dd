package worker

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/services/lifecycle/internal/handler"
)

type nopHandler struct{}

func (nopHandler) Handle(context.Context, pgx.Tx, handler.Job) (handler.Result, error) {
	return handler.Result{}, nil
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	got, err := Config{ID: "w", Handler: nopHandler{}, Lease: 2 * time.Minute}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Concurrency != 4 || got.BatchSize != 100 || got.Lease != 2*time.Minute || got.PollInterval != time.Second ||
		got.MaxBackoff != 5*time.Minute || got.RecoverInterval != 30*time.Second || got.StatsInterval != 5*time.Second {
		t.Fatalf("defaults %+v", got)
	}
	if got.Metrics == nil || got.Tracer == nil || got.Logger == nil || got.OnEffects == nil {
		t.Fatal("a nil dependency was left nil")
	}
	got.OnEffects() // callable
	short, err := Config{ID: "w", Handler: nopHandler{}, Lease: 2 * time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if short.RecoverInterval != time.Second {
		t.Fatalf("recover interval %v for a 2s lease, want the 1s floor", short.RecoverInterval)
	}
}

func TestConfigRejectsWhatCannotRun(t *testing.T) {
	t.Parallel()
	valid := Config{ID: "w", Handler: nopHandler{}}
	tests := []struct {
		name   string
		change func(c *Config)
	}{
		{"no id", func(c *Config) { c.ID = "" }},
		{"no handler", func(c *Config) { c.Handler = nil }},
		{"negative concurrency", func(c *Config) { c.Concurrency = -1 }},
		{"batch over 1000", func(c *Config) { c.BatchSize = 1001 }},
		{"negative lease", func(c *Config) { c.Lease = -time.Second }},
		{"negative poll interval", func(c *Config) { c.PollInterval = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.change(&c)
			if _, err := c.withDefaults(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
