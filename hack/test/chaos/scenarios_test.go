package chaos_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// size is the load of one scenario: release runs and how long the pushes are spread over.
func size() (runs int, over time.Duration) {
	if full() {
		return 240, 40 * time.Second
	}
	return 36, 6 * time.Second
}

// during runs inject at random moments while the load is being sent, times times.
func during(e *env, runs int, over time.Duration, times int, inject func(i int)) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range times {
			time.Sleep(time.Duration(rand.Int64N(int64(over) / int64(times))))
			inject(i)
		}
	}()
	e.load(runs, over)
	wg.Wait()
}

// TestDispatcherCrash kills one of two dispatcher replicas with SIGKILL at random moments under load. One kill
// happens while a workflow dispatch hangs on GitHub, i.e. after its delivery started and before
// its completion: that dispatch must end in reconciliation_required (never replayed), and the
// operator's resolution brings it home.
func TestDispatcherCrash(t *testing.T) {
	t.Parallel()
	// Two replicas: replica 1 is killed again and again; replica 2 survives and keeps working.
	e := newEnvOn(t, pgtest.NewURL(t), envOptions{dispatchers: 2})
	runs, over := size()
	kills := 4
	if full() {
		kills = 20
	}
	during(e, runs, over, kills, func(i int) {
		if i == 0 {
			// The next dispatch hangs (GitHub processed nothing yet); kill while it is in flight.
			e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, Hang: true, Times: 1})
			deadline := time.Now().Add(10 * time.Second)
			for e.count(`SELECT count(*) FROM control_plane_outbox WHERE effect_type = 'github.workflow.dispatch'
				AND status = 'leased' AND delivery_started_at IS NOT NULL`) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
		e.restart("outbox-dispatcher")
	})
	r := e.check("dispatcher crash", runs)
	if r.Reconciliations == 0 {
		t.Error("the dispatch killed mid-delivery did not reach reconciliation_required")
	}
}

// TestLifecycleAndIngestCrash kills lifecycle (mid-batch) and ingest (with requests in flight:
// the sender sees a dropped connection and retries the same delivery id) under load.
func TestLifecycleAndIngestCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs, over := size()
	kills := 4
	if full() {
		kills = 20
	}
	during(e, runs, over, kills, func(i int) {
		if i%2 == 0 {
			e.restart("lifecycle")
		} else {
			e.killIngestMidRequest()
		}
	})
	r := e.check("lifecycle and ingest crash", runs)
	if r.Crashes != kills || r.Retries < kills/2 {
		t.Errorf("%d crashes injected, %d retried deliveries; want %d and at least %d", r.Crashes, r.Retries, kills, kills/2)
	}
}

// TestGitHubFaults runs the load against a failing GitHub: 20 % server errors on every call,
// secondary rate limits with Retry-After on one installation, hanging requests past the client
// timeout, and connections dropped after GitHub processed the request ("maybe delivered").
func TestGitHubFaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs, over := size()
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpCreateCheckRun, DropAfterProcessing: true, Times: 2})
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpDispatchWorkflow, DropAfterProcessing: true, Times: 2})
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpUpdateCheckRun, Hang: true, Times: 2})
	e.sim.AddFault(githubsim.Fault{InstallationID: 7001, SecondaryRateLimit: true, RetryAfter: time.Second, Times: 5})
	// Completing check runs of one installation fails every time until the faults clear: those
	// effects exhaust their attempts and become dead letters, which are replayed afterwards.
	e.sim.AddFault(githubsim.Fault{Operation: githubsim.OpUpdateCheckRun, InstallationID: 7002, ServerErrorRate: 1})
	e.sim.AddFault(githubsim.Fault{ServerErrorRate: 0.2})
	e.load(runs, over)
	deadline := time.Now().Add(90 * time.Second)
	for e.count(`SELECT count(*) FROM control_plane_outbox WHERE status = 'dead_letter'`) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	r := e.check("GitHub faults", runs)
	if r.Reconciliations == 0 || r.DeadLetters == 0 {
		t.Errorf("%d reconciliations, %d dead letters: want both above zero", r.Reconciliations, r.DeadLetters)
	}
}

// TestPoisonInput interleaves malformed and adversarial deliveries with the load: bad
// signatures, oversized bodies, deeply nested JSON, unknown events, and duplicate delivery ids.
// The bad ones are refused, the duplicates stored once, and the valid load completes.
func TestPoisonInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs, over := size()
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	huge := `{"x":"` + strings.Repeat("a", 30<<20) + `"}`
	dupID := newID()
	type poison struct {
		name, event, body string
		sign              bool
		id                string
		want              func(int) bool
	}
	refused := func(c int) bool { return c >= 400 && c < 500 }
	accepted := func(c int) bool { return c >= 200 && c < 300 }
	poisons := []poison{
		{"bad signature", "push", `{"ref":"refs/tags/v9.9.9"}`, false, "", refused},
		{"oversized body", "push", huge, true, "", refused},
		{"deep JSON", "push", deep, true, "", refused},
		{"not JSON", "push", "\x00\x01garbage", true, "", refused},
		{"unknown event", "sponsorship", `{"action":"created"}`, true, "", accepted},
		{"duplicate delivery id", "ping", `{"zen":"x","hook_id":1}`, true, dupID, accepted},
	}
	during(e, runs, over, len(poisons)*2, func(i int) {
		p := poisons[i%len(poisons)]
		id := p.id
		if id == "" {
			id = newID()
		}
		code := e.post(id, p.event, []byte(p.body), p.sign)
		if !p.want(code) {
			t.Errorf("%s: answered %d", p.name, code)
		}
		e.mu.Lock()
		e.poisonOut[p.name+" → "+http.StatusText(code)]++
		// Unhandled events are answered 202 and deliberately not stored (docs/webhooks.md).
		if accepted(code) && p.event != "sponsorship" {
			e.acked[id] = true
		}
		e.mu.Unlock()
	})
	r := e.check("poison input", runs)
	if n := e.count(`SELECT count(*) FROM webhook_inbox WHERE delivery_id = $1`, dupID); n != 1 {
		t.Errorf("duplicate delivery id stored %d times", n)
	}
	if n := e.count(`SELECT count(*) FROM webhook_inbox WHERE event = 'sponsorship'`); n != 0 {
		t.Errorf("an unhandled event was stored %d times", n)
	}
	t.Logf("poison answers: %v (report %s)", e.poisonOut, r)
}

// TestPostgresRestart restarts PostgreSQL under load, once with a fast and once with an
// immediate shutdown (crash recovery). The services keep running and recover on their own;
// ingest answers 503 while the database is away, and the senders retry.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	url := c.URL("postgres")
	m, err := migrate.Open(url, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	e := newEnvOn(t, url, envOptions{})
	runs, over := size()
	saw503 := false
	during(e, runs, over, 2, func(i int) {
		c.Interrupt(i == 1)
		// While the database is away, ingest refuses with 503 (GitHub will retry).
		body, _ := json.Marshal(map[string]any{"zen": "outage", "hook_id": 1})
		for range 20 {
			if code := e.post(newID(), "ping", body, true); code == http.StatusServiceUnavailable {
				saw503 = true
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := c.Resume(ctx); err != nil {
			t.Fatalf("resume: %v", err)
		}
		e.mu.Lock()
		e.crashes++
		e.mu.Unlock()
	})
	r := e.check("PostgreSQL restart (fast, immediate)", runs)
	if !saw503 {
		t.Error("ingest never answered 503 while PostgreSQL was down")
	}
	for name, s := range e.svc {
		select {
		case <-s.Exited():
			t.Errorf("%s exited during the outage; services must recover without a restart", name)
		default:
		}
	}
	_ = r
}
