package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReleaseRunsList(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	_, dispatching := o.enqueueDispatch()
	_, recon, _ := o.dispatch("reconciliation_required")
	if _, err := o.pool.Exec(o.ctx, `
		INSERT INTO repositories (id, installation_id, full_name) VALUES (2, 55501, 'octo-org/other');
		UPDATE release_runs SET created_at = now() - interval '3 hours', updated_at = now() - interval '2 hours' WHERE id = '`+recon+`';
		UPDATE release_runs SET created_at = now() - interval '2 hours', updated_at = now() - interval '10 minutes' WHERE id = '`+dispatching+`'`); err != nil {
		t.Fatal(err)
	}
	ids := func(args ...string) []string {
		t.Helper()
		code, out, errOut := run(t, o.env, append([]string{"release-runs", "list", "-o", "json"}, args...)...)
		var runs []struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &runs) != nil {
			t.Fatalf("list %v: %d %s %s", args, code, out, errOut)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.ID)
		}
		return got
	}
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{dispatching, recon}},
		{[]string{"--repo", "octo-org/hello-world"}, []string{dispatching, recon}},
		{[]string{"--repo", "octo-org/other"}, nil},
		{[]string{"--status", "blocked", "--older-than", "1h"}, []string{recon}}, // awaiting reconciliation blocks the run
		{[]string{"--status", "dispatching", "--older-than", "1h"}, []string{dispatching}},
		{[]string{"--newer-than", "1h"}, nil},
		{[]string{"--repo", "octo-org/hello-world", "--status", "dispatching", "--newer-than", "4h"}, []string{dispatching}},
		// Stale as the gauge counts them: blocked for hours, not the one that moved ten minutes ago.
		{[]string{"--unchanged-for", "1h"}, []string{recon}},
		{[]string{"--status", "dispatching", "--unchanged-for", "5m"}, []string{dispatching}},
	}
	for _, tt := range tests {
		if got := ids(tt.args...); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("list %v: %v, want %v", tt.args, got, tt.want)
		}
	}
	for _, args := range [][]string{{"--status", "stuck"}, {"--repo", "nobody"}, {"--limit", "0"}, {"--unchanged-for", "-1h"}} {
		if code, _, _ := run(t, o.env, append([]string{"release-runs", "list"}, args...)...); code != 2 {
			t.Errorf("list %v: exit %d, want 2", args, code)
		}
	}
}

// A repository's name is not unique: a deleted repository keeps its row, and a new one may take
// its name. Every command that takes a name or shows a run must still answer, and --repo means
// the repository still installed.
func TestReleaseRunsWithAReusedRepositoryName(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	oldRun := o.createRun() // repository 1, octo-org/hello-world
	if _, err := o.pool.Exec(o.ctx, `
		UPDATE repositories SET removed_at = now() - interval '1 day' WHERE id = 1;
		INSERT INTO repositories (id, installation_id, full_name) VALUES (2, 55501, 'octo-org/hello-world')`); err != nil {
		t.Fatal(err)
	}
	var newRun string
	if err := o.pool.QueryRow(o.ctx, `SELECT boardreadyops_release_run_create(2, 55501, 'refs/tags/v9.9.9', repeat('b', 40),
		'boardreadyops-release.yml', 'BoardReadyOps release')::text`).Scan(&newRun); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, o.env, "release-runs", "show", oldRun); code != 0 || !strings.Contains(out, oldRun) {
		t.Fatalf("show the deleted repository's run: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := run(t, o.env, "release-runs", "show", "--repo", "octo-org/hello-world", "--tag", "v9.9.9"); code != 0 || !strings.Contains(out, newRun) {
		t.Fatalf("show --repo --tag: %d %s %s", code, out, errOut)
	}
	code, out, errOut := run(t, o.env, "release-runs", "list", "--repo", "octo-org/hello-world", "-o", "json")
	var runs []struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &runs) != nil || len(runs) != 1 || runs[0].ID != newRun {
		t.Fatalf("list --repo: %d %s %s; want only the installed repository's run %s", code, out, errOut, newRun)
	}
	// repos settings means the same repository.
	if code, out, errOut := run(t, o.env, "repos", "settings", "set", "octo-org/hello-world", "--workflow-file", "ship.yml", "--reason", "renamed"); code != 0 {
		t.Fatalf("repos settings set: %d %s %s", code, out, errOut)
	}
	var repo int64
	if err := o.pool.QueryRow(o.ctx, `SELECT repository_id FROM repository_release_settings`).Scan(&repo); err != nil || repo != 2 {
		t.Fatalf("settings written for repository %d (%v), want the installed one, 2", repo, err)
	}
}

// A list that stops at its --limit with more rows matching says so: above the table, or on
// stderr beside -o json's list. An unknown --effect-type is a usage error, not an empty list.
func TestListsSayWhenMoreMatch(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.enqueueDispatch()
	o.enqueueDispatch()
	if _, err := o.pool.Exec(o.ctx, `WITH i AS (
			INSERT INTO webhook_inbox (delivery_id, event, payload, payload_sha256) SELECT 'd-' || g, 'push', '{}', sha256(('b' || g)::bytea)
			FROM generate_series(1, 2) g RETURNING id)
		INSERT INTO control_plane_jobs (kind, inbox_id) SELECT 'push', id FROM i`); err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]string{{"outbox", "list"}, {"jobs", "list"}, {"release-runs", "list"}} {
		code, out, errOut := run(t, o.env, append(list, "--limit", "1", "-o", "json")...)
		var rows []json.RawMessage
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || !strings.Contains(errOut, "brops: the newest 1 shown; more match") {
			t.Errorf("%v --limit 1 -o json: %d %s %s; want one row and the note on stderr", list, code, out, errOut)
		}
		if code, out, _ := run(t, o.env, append(list, "--limit", "1")...); code != 0 || !strings.HasPrefix(out, "the newest 1 shown; more match") {
			t.Errorf("%v --limit 1: %d %s; want the note above the table", list, code, out)
		}
		if code, _, errOut := run(t, o.env, append(list, "--limit", "1000", "-o", "json")...); code != 0 || strings.Contains(errOut, "more match") {
			t.Errorf("%v --limit 1000: %d %s; want no note when everything is shown", list, code, errOut)
		}
	}
	for _, args := range [][]string{{"outbox", "list", "--effect-type", "github.check_run.cretae"},
		{"outbox", "replay", "--all-dead-letters", "--effect-type", "github.workflow.dispach", "--reason", "x", "--dry-run"}} {
		if code, _, errOut := run(t, o.env, args...); code != 2 || !strings.Contains(errOut, "--effect-type") {
			t.Errorf("%v: %d %s; want a usage error naming --effect-type", args, code, errOut)
		}
	}
}
