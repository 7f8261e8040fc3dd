package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/githubapp"
)

// NoopGitHub answers every request at once (exported for the package's external tests: the
// benchmark of the queue machinery measures the dispatcher alone with it).
type NoopGitHub struct{}

func (NoopGitHub) FindOrCreateCheckRun(context.Context, githubapp.CheckRun) (int64, bool, error) {
	return 1, true, nil
}
func (NoopGitHub) DispatchWorkflowRun(context.Context, githubapp.Dispatch) (githubapp.DispatchedRun, error) {
	return githubapp.DispatchedRun{}, nil
}
func (NoopGitHub) UpdateCheckRun(context.Context, githubapp.CheckRunUpdate) error { return nil }
func (NoopGitHub) GetWorkflowRun(context.Context, int64, string, int64) (githubapp.WorkflowRun, error) {
	return githubapp.WorkflowRun{}, nil
}

func (NoopGitHub) GetCollaboratorPermission(context.Context, int64, string, string) (githubapp.CollaboratorPermission, error) {
	return githubapp.CollaboratorPermission{}, nil
}

// TagCommit answers that the tag still points at the commit expected.
func (NoopGitHub) TagCommit(_ context.Context, _ int64, _, _, expected string) (string, error) {
	return expected, nil
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   Config
		want Config // the settings only
	}{
		{"service defaults", Config{WorkerID: "d", GitHub: NoopGitHub{}},
			Config{Concurrency: 32, PerInstallation: 1, BatchSize: 32, Lease: time.Minute, PollInterval: time.Second,
				MaxBackoff: 10 * time.Minute, RecoverInterval: 15 * time.Second, StatsInterval: 5 * time.Second, CheckRunName: "BoardReadyOps release", RateLimitBackoff: time.Minute, RateLimitMaxBackoff: 16 * time.Minute}},
		{"unpaced: the in-process bound is the concurrency", Config{WorkerID: "d", GitHub: NoopGitHub{}, Unpaced: true},
			Config{Concurrency: 32, PerInstallation: 32, Unpaced: true, BatchSize: 32, Lease: time.Minute, PollInterval: time.Second,
				MaxBackoff: 10 * time.Minute, RecoverInterval: 15 * time.Second, StatsInterval: 5 * time.Second, CheckRunName: "BoardReadyOps release", RateLimitBackoff: time.Minute, RateLimitMaxBackoff: 16 * time.Minute}},
		{"small concurrency bounds the batch", Config{WorkerID: "d", GitHub: NoopGitHub{}, Concurrency: 4, BatchSize: 64, Lease: 20 * time.Second},
			Config{Concurrency: 4, PerInstallation: 1, BatchSize: 4, Lease: 20 * time.Second, PollInterval: time.Second,
				MaxBackoff: 10 * time.Minute, RecoverInterval: 5 * time.Second, StatsInterval: 5 * time.Second, CheckRunName: "BoardReadyOps release", RateLimitBackoff: time.Minute, RateLimitMaxBackoff: 16 * time.Minute}},
		{"claim fill stays zero: never waits", Config{WorkerID: "d", GitHub: NoopGitHub{}, ClaimFill: 0, Lease: 2 * time.Second},
			Config{Concurrency: 32, PerInstallation: 1, BatchSize: 32, Lease: 2 * time.Second, PollInterval: time.Second,
				MaxBackoff: 10 * time.Minute, RecoverInterval: time.Second, StatsInterval: 5 * time.Second, CheckRunName: "BoardReadyOps release", RateLimitBackoff: time.Minute, RateLimitMaxBackoff: 16 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.in.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got.Metrics == nil || got.Tracer == nil || got.Logger == nil {
				t.Fatal("a nil dependency was left nil")
			}
			got.WorkerID, got.GitHub, got.Metrics, got.Tracer, got.Logger = "", nil, nil, nil, nil
			if got != tt.want {
				t.Fatalf("settings\n%+v, want\n%+v", got, tt.want)
			}
		})
	}
}

func TestConfigRejectsWhatCannotRun(t *testing.T) {
	t.Parallel()
	valid := Config{WorkerID: "d", GitHub: NoopGitHub{}}
	tests := []struct {
		name   string
		change func(c *Config)
	}{
		{"no worker id", func(c *Config) { c.WorkerID = "" }},
		{"no GitHub", func(c *Config) { c.GitHub = nil }},
		{"negative concurrency", func(c *Config) { c.Concurrency = -1 }},
		{"per installation over the concurrency", func(c *Config) { c.Concurrency, c.PerInstallation = 4, 5 }},
		{"negative claim fill", func(c *Config) { c.ClaimFill = -time.Millisecond }},
		{"negative lease", func(c *Config) { c.Lease = -time.Second }},
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
