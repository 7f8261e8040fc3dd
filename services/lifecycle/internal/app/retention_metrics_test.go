package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// With retention disabled, lifecycle still exports the retention series, the leader at 0: the
// alerts built on them (BoardReadyOpsRetentionNoLeader) fire instead of losing their series and
// going quiet while nothing is deleted.
func TestRetentionDisabledKeepsItsSeries(t *testing.T) {
	t.Parallel()
	metrics, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": pgtest.NewURL(t), "METRICS_ADDR": metrics, "BOARDREADYOPS_RETENTION_ENABLED": "false"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, nil, func(k string) string { return env[k] }, io.Discard) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("lifecycle did not stop")
		}
	}()
	want := []string{"boardreadyops_retention_leader 0", `boardreadyops_retention_oldest_expired_seconds{table="control_plane_jobs"} 0`}
	deadline := time.Now().Add(20 * time.Second)
	var body string
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + metrics + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			found := 0
			for _, w := range want {
				if strings.Contains(body, w) {
					found++
				}
			}
			if found == len(want) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("metrics never showed %q:\n%s", want, body)
}
