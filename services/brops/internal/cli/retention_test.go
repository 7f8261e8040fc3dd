package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/pkg/retention"
	"github.com/boardreadyops/cloud/services/brops/internal/cli"
)

// brops retention status and run --dry-run report what would go and delete nothing; run deletes
// it, and refuses while another process holds the retention lease.
func TestRetentionCommands(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	if _, err := o.pool.Exec(o.ctx, `WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256, received_at)
			SELECT 'old-' || g, 'push', '{}', sha256('x'::bytea), now() - interval '10 days' FROM generate_series(1, 5) g RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id, status, completed_at)
		SELECT 'push', id, CASE WHEN id % 5 = 0 THEN 'dead_letter' ELSE 'completed' END,
		       CASE WHEN id % 5 <> 0 THEN now() - interval '10 days' END FROM i`); err != nil {
		t.Fatal(err)
	}
	// Digests past the 30-day replay window whose delivery left the inbox (3 go), one whose
	// delivery is the dead letter's (it stays with its inbox row) and one within the window.
	if _, err := o.pool.Exec(o.ctx, `INSERT INTO webhook_body_digests (payload_sha256, delivery_id, received_at)
		SELECT sha256(('gone-' || g)::bytea), 'gone-' || g, now() - interval '40 days' FROM generate_series(1, 3) g
		UNION ALL SELECT sha256('dead'::bytea), i.delivery_id, now() - interval '40 days'
		    FROM webhook_inbox i JOIN control_plane_jobs j ON j.inbox_id = i.id WHERE j.status = 'dead_letter'
		UNION ALL SELECT sha256('recent'::bytea), 'recent', now() - interval '29 days'`); err != nil {
		t.Fatal(err)
	}
	expired := func(table string, args ...string) (int64, map[string]any) {
		t.Helper()
		code, out, errOut := run(t, o.env, append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s %s", args, code, out, errOut)
		}
		var rep struct {
			Tables []retention.TableStatus `json:"tables"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
		for _, ts := range rep.Tables {
			if ts.Table == table && ts.Expired != nil {
				return *ts.Expired, nil
			}
		}
		t.Fatalf("%v: no %s row in %s", args, table, out)
		return 0, nil
	}
	jobsExpired := func(args ...string) (int64, map[string]any) { return expired(retention.TableJobs, args...) }
	if n, _ := jobsExpired("retention", "status"); n != 4 {
		t.Fatalf("status: %d expired jobs, want 4 (the dead letter is not)", n)
	}
	if n, _ := jobsExpired("retention", "run", "--dry-run"); n != 4 {
		t.Fatalf("dry run: %d expired jobs, want 4", n)
	}
	if n, _ := expired(retention.TableDigests, "retention", "status"); n != 3 {
		t.Fatalf("status: %d expired digests, want 3 (not the dead letter's, not the recent one)", n)
	}
	if n, _ := expired(retention.TableDigests, "retention", "run", "--dry-run"); n != 3 {
		t.Fatalf("dry run: %d expired digests, want 3", n)
	}
	if code, out, _ := run(t, o.env, "retention", "run", "--dry-run"); code != 0 || !regexp.MustCompile(`(?m)^webhook_body_digests +720h0m0s +3 `).MatchString(out) {
		t.Fatalf("dry run table: exit %d\n%s\nwant a webhook_body_digests row: 720h, 3 expired", code, out)
	}
	if n, _ := jobsExpired("retention", "status", "--jobs", "264h"); n != 0 {
		t.Fatalf("status with an 11-day period: %d expired jobs, want 0", n)
	}
	if code, _, errOut := run(t, o.env, "retention", "status", "--jobs", "1h"); code != 2 || !strings.Contains(errOut, "redelivery window") {
		t.Fatalf("a 1h jobs period: exit %d %s, want 2 naming the redelivery window", code, errOut)
	}
	if code, _, errOut := run(t, o.env, "retention", "status", "--digests", "48h"); code != 2 || !strings.Contains(errOut, "BOARDREADYOPS_RETENTION_DIGESTS") {
		t.Fatalf("a 48h digests period: exit %d %s, want 2 naming BOARDREADYOPS_RETENTION_DIGESTS", code, errOut)
	}
	// The digests period is raised as lifecycle raises it: to a longer jobs period, and to never
	// beside a jobs period of never. brops must delete no digest lifecycle keeps.
	if n, _ := expired(retention.TableDigests, "retention", "status", "--jobs", "1080h"); n != 0 {
		t.Fatalf("status with a 45-day jobs period: %d expired digests, want 0 (the period is raised to 45 days)", n)
	}
	if code, out, _ := run(t, o.env, "retention", "run", "--dry-run", "--jobs", "0"); code != 0 || !regexp.MustCompile(`(?m)^webhook_body_digests +never `).MatchString(out) {
		t.Fatalf("dry run with jobs kept forever: exit %d\n%s\nwant digests kept forever too", code, out)
	}

	store := &retention.Store{}
	if _, err := store.Acquire(o.ctx, o.pool, "lifecycle/pod-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, o.env, "retention", "run", "--yes"); code != 1 || !strings.Contains(errOut, "lifecycle/pod-1") {
		t.Fatalf("run while lifecycle holds the lease: exit %d %s, want 1 naming the holder", code, errOut)
	}
	if err := store.Release(o.ctx, o.pool, "lifecycle/pod-1"); err != nil {
		t.Fatal(err)
	}
	// Not confirmed: the periods printed, nothing deleted. brops' periods are its own settings,
	// which may not be the lifecycle service's.
	for _, answer := range []string{"", "n\n"} {
		var out, errOut bytes.Buffer
		code := cli.Execute(context.Background(), []string{"retention", "run"}, func(k string) string { return o.env[k] },
			strings.NewReader(answer), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "control_plane_jobs 168h0m0s") || !strings.Contains(errOut.String(), "not confirmed") {
			t.Fatalf("run answered %q: exit %d %s, want 2 with the periods and no deletion", answer, code, errOut.String())
		}
		if n, _ := jobsExpired("retention", "status"); n != 4 {
			t.Fatalf("after an unconfirmed run: %d expired jobs, want the 4 still there", n)
		}
	}
	code, out, errOut := run(t, o.env, "retention", "run", "-o", "json", "--yes")
	if code != 0 {
		t.Fatalf("run: exit %d %s %s", code, out, errOut)
	}
	var deleted map[string]int64
	if err := json.Unmarshal([]byte(out), &deleted); err != nil || deleted[retention.TableJobs] != 4 || deleted[retention.TableDigests] != 3 {
		t.Fatalf("run deleted %s (%v), want 4 jobs and 3 digests", out, err)
	}
	var left int
	if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FROM control_plane_jobs WHERE status = 'dead_letter'`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("dead letters after the run: %d %v, want 1", left, err)
	}
	if n, _ := jobsExpired("retention", "status"); n != 0 {
		t.Fatalf("status after the run: %d expired", n)
	}
	var digests int
	if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FROM webhook_body_digests`).Scan(&digests); err != nil || digests != 2 {
		t.Fatalf("digests after the run: %d %v, want the dead letter's and the recent one", digests, err)
	}
}

// brops retention reindex rebuilds the claim indexes its estimate finds bloated: after 20,000
// claims and completions the jobs claim index is mostly empty pages, and a rebuild shrinks it.
func TestRetentionReindex(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	if _, err := o.pool.Exec(o.ctx, `WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256)
			SELECT 'b-' || g, 'push', '{}', sha256('x'::bytea) FROM generate_series(1, 20000) g RETURNING id
		)
		INSERT INTO control_plane_jobs (kind, inbox_id) SELECT 'push', id FROM i`); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := o.pool.Exec(o.ctx, `SELECT boardreadyops_job_complete(id, 'w') FROM boardreadyops_job_claim('w', 999, '1 minute')`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.pool.Exec(o.ctx, `VACUUM control_plane_jobs`); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Index      string  `json:"index"`
		SizeBytes  int64   `json:"size_bytes"`
		BloatRatio float64 `json:"bloat_ratio"`
		Rebuilt    bool    `json:"rebuilt"`
		SizeAfter  *int64  `json:"size_after_bytes"`
	}
	reindex := func(args ...string) map[string]row {
		t.Helper()
		code, out, errOut := run(t, o.env, append([]string{"retention", "reindex", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("reindex %v: exit %d %s %s", args, code, out, errOut)
		}
		var rows []row
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		m := map[string]row{}
		for _, r := range rows {
			m[r.Index] = r
		}
		return m
	}
	dry := reindex("--dry-run")
	claim := dry["control_plane_jobs_claim_idx"]
	if len(dry) != 4 || claim.BloatRatio < 4 || claim.Rebuilt {
		t.Fatalf("dry run: %+v, want four indexes, the jobs claim index at least 4× too large and nothing rebuilt", dry)
	}
	got := reindex("--min-size-mib", "0")["control_plane_jobs_claim_idx"]
	if !got.Rebuilt || got.SizeAfter == nil || *got.SizeAfter >= claim.SizeBytes/4 {
		t.Fatalf("reindex: %+v, want the jobs claim index rebuilt to under a quarter of %d bytes", got, claim.SizeBytes)
	}
	t.Logf("control_plane_jobs_claim_idx: %d bytes (ratio %.1f) rebuilt to %d", claim.SizeBytes, claim.BloatRatio, *got.SizeAfter)
}
