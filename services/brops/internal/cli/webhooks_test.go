package cli_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

func TestWebhooksRedeliverRequestsExactlyTheMissingFailures(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	sim, key := redeliverSim(t)
	now := time.Now()
	payload := []byte(`{"zen":"x"}`)
	sim.RecordDelivery("guid-stored-anyway", "push", "", 502, payload, now.Add(-time.Hour)) // failed on GitHub's side, but in the inbox
	wantB := sim.RecordDelivery("guid-failed", "push", "", 503, payload, now.Add(-2*time.Hour))
	sim.RecordDelivery("guid-ok", "push", "", 202, payload, now.Add(-2*time.Hour))
	sim.RecordDelivery("guid-twice", "workflow_run", "completed", 500, payload, now.Add(-3*time.Hour))
	wantD := sim.RecordDelivery("guid-twice", "workflow_run", "completed", 0, payload, now.Add(-150*time.Minute)) // newest attempt
	sim.RecordDelivery("guid-old", "push", "", 500, payload, now.Add(-10*time.Hour))                              // outside --since
	sim.RecordDelivery("guid-recovered", "push", "", 500, payload, now.Add(-4*time.Hour))
	sim.RecordDelivery("guid-recovered", "push", "", 202, payload, now.Add(-3*time.Hour))
	// Ingest received these and, lifecycle ignoring their event, stored only their body digests:
	// one GitHub counts as delivered, one it saw fail (a timeout after ingest answered).
	sim.RecordDelivery("guid-ignored", "create", "", 202, payload, now.Add(-time.Hour))
	sim.RecordDelivery("guid-ignored-failed", "create", "", 504, payload, now.Add(-time.Hour))
	for _, id := range []string{"guid-ignored", "guid-ignored-failed"} {
		if _, err := o.pool.Exec(o.ctx, `SELECT boardreadyops_webhook_record_ignored($1, sha256(convert_to($1, 'UTF8')))`, id); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 150; i++ { // pages: 100 per page
		sim.RecordDelivery("guid-filler-"+strconv.Itoa(i), "ping", "", 200, payload, now.Add(-time.Duration(i)*time.Second))
	}
	if _, err := o.pool.Exec(o.ctx, `SELECT boardreadyops_webhook_accept('guid-stored-anyway', 'ping', NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`); err != nil {
		t.Fatal(err)
	}
	env := redeliverEnv(t, o, sim, key)
	guids := func(out string) []string { return redeliveries(t, out) }
	code, out, errOut := run(t, env, "webhooks", "redeliver", "--since", "6h", "--dry-run", "-o", "json")
	if code != 0 || strings.Join(guids(out), ",") != "guid-failed:would_request,guid-twice:would_request" {
		t.Fatalf("dry run: %d %s %s", code, out, errOut)
	}
	if n := sim.Count(githubsim.OpRedeliver, 0); n != 0 {
		t.Fatalf("dry run requested %d redeliveries", n)
	}
	// A fixed start, as brops restore fence prints it, means the same window.
	fixed := now.Add(-6 * time.Hour).UTC().Format(time.RFC3339)
	if code, out, errOut := run(t, env, "webhooks", "redeliver", "--since", fixed, "--dry-run", "-o", "json"); code != 0 ||
		strings.Join(guids(out), ",") != "guid-failed:would_request,guid-twice:would_request" || !strings.Contains(errOut, "since "+fixed) {
		t.Fatalf("--since %s: %d %s %s", fixed, code, out, errOut)
	}
	code, out, _ = run(t, env, "webhooks", "redeliver", "--since", "6h", "-o", "json")
	if code != 0 || strings.Join(guids(out), ",") != "guid-failed:requested,guid-twice:requested" {
		t.Fatalf("redeliver: %d %s", code, out)
	}
	var paths []string
	for _, e := range sim.Journal() {
		if e.Operation == githubsim.OpRedeliver {
			paths = append(paths, e.Path)
		}
	}
	sort.Strings(paths)
	want := []string{"/app/hook/deliveries/" + strconv.FormatInt(wantB, 10) + "/attempts", "/app/hook/deliveries/" + strconv.FormatInt(wantD, 10) + "/attempts"}
	sort.Strings(want)
	if strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Fatalf("redelivered %v, want each missing GUID once (newest attempt) %v", paths, want)
	}
	// After a restore: also the GUIDs GitHub delivered but the database does not know (guid-ok,
	// guid-recovered and the fillers), never guid-stored-anyway nor the ignored ones, which would
	// otherwise come back at every run.
	code, out, _ = run(t, env, "webhooks", "redeliver", "--since", "6h", "--include-delivered", "--dry-run", "--max-requests", "1000", "-o", "json")
	got := strings.Join(guids(out), ",")
	if code != 0 || len(guids(out)) != 2+2+150 || !strings.Contains(got, "guid-ok:would_request") ||
		strings.Contains(got, "guid-stored-anyway") || strings.Contains(got, "guid-ignored") {
		t.Fatalf("--include-delivered: %d, %d GUIDs %.300s", code, len(guids(out)), got)
	}
	// While a fence is open, a GUID delivered or redelivered and answered 2xx since it reached the
	// restored deployment's ingest: filtered, it left no row, and asking again could not change
	// that. Such a GUID is not asked again; one whose attempt failed, or came before the fence,
	// is. A closed fence takes none as arrived.
	if code, out, errOut := run(t, env, "restore", "fence", "--since", now.Add(-time.Minute).UTC().Format(time.RFC3339)); code != 0 {
		t.Fatalf("fence: %d %s %s", code, out, errOut)
	}
	sim.RecordRedelivery("guid-filler-0", "ping", "", 202, payload, time.Now().Add(time.Second))
	sim.RecordDelivery("guid-after-fence", "push", "", 202, payload, time.Now().Add(time.Second))
	sim.RecordRedelivery("guid-filler-1", "ping", "", 502, payload, time.Now().Add(time.Second))
	sim.RecordRedelivery("guid-filler-2", "ping", "", 202, payload, now.Add(-30*time.Minute))
	afterFence := func() string {
		t.Helper()
		code, out, _ := run(t, env, "webhooks", "redeliver", "--since", "6h", "--include-delivered", "--dry-run", "--max-requests", "1000", "-o", "json")
		if code != 0 {
			t.Fatalf("--include-delivered after a fence: %d %s", code, out)
		}
		return strings.Join(guids(out), ",")
	}
	if got := afterFence(); len(strings.Split(got, ",")) != 2+2+149 || strings.Contains(got, "guid-filler-0:") || strings.Contains(got, "guid-after-fence:") ||
		!strings.Contains(got, "guid-filler-1:") || !strings.Contains(got, "guid-filler-2:") {
		t.Fatalf("--include-delivered, fence open: %d GUIDs %.300s", len(strings.Split(got, ",")), got)
	}
	// More than --max-requests: the oldest, and the count left for the next run.
	code, out, _ = run(t, env, "webhooks", "redeliver", "--since", "6h", "--include-delivered", "--dry-run", "--max-requests", "10")
	if code != 0 || !strings.Contains(out, "153 missing from the inbox") || !strings.Contains(out, "the oldest 10 taken (--max-requests); 143 left for the next run") ||
		!strings.Contains(out, "2 delivered since the open restore fence") {
		t.Fatalf("--max-requests 10: %d\n%s", code, out)
	}
	// --max-pages that does not reach back to --since: it says so and exits 1, so that a dry run
	// that read only the newest deliveries is not taken for "none missing".
	code, out, errOut = run(t, env, "webhooks", "redeliver", "--since", "6h", "--include-delivered", "--dry-run", "--max-pages", "1")
	if code != 1 || !strings.Contains(out, "only the newest 1 pages read (--max-pages)") || !strings.Contains(errOut, "--max-pages 1 did not reach back to --since") {
		t.Fatalf("--max-pages 1: %d\n%s\nstderr: %s", code, out, errOut)
	}
	// With -o json, stdout is the list of requests and the counts go to stderr.
	code, out, errOut = run(t, env, "webhooks", "redeliver", "--since", "6h", "--include-delivered", "--dry-run", "--max-requests", "10", "-o", "json")
	if code != 0 || len(guids(out)) != 10 || !strings.Contains(errOut, "brops: the oldest 10 taken (--max-requests); 143 left for the next run") ||
		!strings.Contains(errOut, "brops: 2 delivered since the open restore fence") || !strings.Contains(errOut, "153 missing from the inbox") {
		t.Fatalf("--max-requests 10 -o json: %d\n%s\nstderr: %s", code, out, errOut)
	}
	if code, out, errOut := run(t, env, "restore", "close"); code != 0 {
		t.Fatalf("close: %d %s %s", code, out, errOut)
	}
	if got := afterFence(); len(strings.Split(got, ",")) != 2+2+150+1 {
		t.Fatalf("--include-delivered, fence closed: %d GUIDs, want every one the database lacks", len(strings.Split(got, ",")))
	}
	// The chart's CronJob runs it as the redelivery login, which reads only what it needs (00065).
	login := map[string]string{}
	for k, v := range env {
		login[k] = v
	}
	login["DATABASE_URL"] = pgtest.NewLogin(t, env["DATABASE_URL"], "boardreadyops_redeliver")
	for _, args := range [][]string{{"--dry-run"}, {"--include-delivered", "--dry-run"}} {
		if code, out, errOut := run(t, login, append([]string{"webhooks", "redeliver", "--since", "6h"}, args...)...); code != 0 {
			t.Fatalf("as the redelivery login, %v: %d %s %s", args, code, out, errOut)
		}
	}
	for _, bad := range []string{"100h", "0s", "-1h", "yesterday", now.Add(-73 * time.Hour).UTC().Format(time.RFC3339), now.Add(time.Hour).UTC().Format(time.RFC3339)} {
		if code, _, errOut := run(t, env, "webhooks", "redeliver", "--since", bad); code != 2 || !strings.Contains(errOut, "--since") {
			t.Errorf("--since %s: %d %s, want a usage error", bad, code, errOut)
		}
	}
	for _, bad := range [][]string{{"--max-pages", "0"}, {"--max-requests", "0"}} {
		if code, _, errOut := run(t, env, append([]string{"webhooks", "redeliver", "--since", "6h"}, bad...)...); code != 2 || !strings.Contains(errOut, "want at least 1") {
			t.Errorf("%v: %d %s, want a usage error", bad, code, errOut)
		}
	}
}

// redeliverSim is a simulator of GitHub for App 7, and the App's private key.
func redeliverSim(t *testing.T) (*githubsim.Simulator, []byte) {
	t.Helper()
	key, pub, err := githubsim.NewAppKey()
	if err != nil {
		t.Fatal(err)
	}
	sim := githubsim.New(githubsim.Options{AppID: 7, AppPublicKey: pub})
	t.Cleanup(sim.Close)
	return sim, key
}

// redeliverEnv is brops' environment for webhooks redeliver against sim, as App 7 with key.
func redeliverEnv(t *testing.T, o *ops, sim *githubsim.Simulator, key []byte) map[string]string {
	t.Helper()
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"DATABASE_URL": o.env["DATABASE_URL"], "BOARDREADYOPS_GITHUB_API_URL": srv.URL,
		"BOARDREADYOPS_GITHUB_APP_ID": "7", "BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE": keyFile}
}

// redeliveries is -o json's list as sorted GUID:result pairs.
func redeliveries(t *testing.T, out string) []string {
	t.Helper()
	var rs []struct{ GUID, Result string }
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var g []string
	for _, r := range rs {
		g = append(g, r.GUID+":"+r.Result)
	}
	sort.Strings(g)
	return g
}

// A delivery whose newest attempt ingest answered 422 (the database can never store its body) is
// refused the same way at every redelivery: the job no longer asks for it again at every run of its
// window, and says how many it passed over; --include-refused asks. A 400 or 413 (a proxy in front
// of ingest may have answered it), a 401 (the secret rotated since), a 408, and one refused once but
// failing otherwise since are asked.
func TestWebhooksRedeliverPassesOverRefusedBodies(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	sim, key := redeliverSim(t)
	now := time.Now()
	payload := []byte(`{"zen":"x"}`)
	for status, guid := range map[int]string{400: "guid-400", 413: "guid-413", 422: "guid-422", 401: "guid-401", 408: "guid-408"} {
		sim.RecordDelivery(guid, "push", "", status, payload, now.Add(-time.Hour))
	}
	sim.RecordDelivery("guid-422-then-503", "push", "", 422, payload, now.Add(-2*time.Hour))
	sim.RecordDelivery("guid-422-then-503", "push", "", 503, payload, now.Add(-time.Hour))
	env := redeliverEnv(t, o, sim, key)
	tests := []struct {
		args    []string
		want    string
		counted bool
	}{
		{nil, "guid-400:would_request,guid-401:would_request,guid-408:would_request,guid-413:would_request,guid-422-then-503:would_request", true},
		{[]string{"--include-refused"}, "guid-400:would_request,guid-401:would_request,guid-408:would_request," +
			"guid-413:would_request,guid-422-then-503:would_request,guid-422:would_request", false},
	}
	for _, tt := range tests {
		code, out, errOut := run(t, env, append([]string{"webhooks", "redeliver", "--since", "6h", "--dry-run", "-o", "json"}, tt.args...)...)
		if got := strings.Join(redeliveries(t, out), ","); code != 0 || got != tt.want {
			t.Errorf("%v: %d %s, want %s", tt.args, code, got, tt.want)
		}
		if counted := strings.Contains(errOut, "1 answered 422 by ingest"); counted != tt.counted {
			t.Errorf("%v: stderr %q, want the refused one counted: %v", tt.args, errOut, tt.counted)
		}
	}
}
