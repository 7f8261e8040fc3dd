package cli_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/outbox"
)

const (
	commitA = "1111111111111111111111111111111111111111"
	commitB = "2222222222222222222222222222222222222222222222222222222222222222" // SHA-256
)

// runStartFixture records, beside octo-org/hello-world (installation 55501, whose settings
// exclude *-rc*), a repository for each rule a tag push applies.
func (o *ops) runStartFixture() {
	o.t.Helper()
	_, err := o.pool.Exec(o.ctx, `
		INSERT INTO installations (id, account_login, account_type, suspended_at, deleted_at) VALUES
			(55501, 'octo-org', 'Organization', NULL, NULL),
			(55502, 'frozen-org', 'Organization', now(), NULL),
			(55503, 'gone-org', 'Organization', NULL, now()),
			(55504, 'quiet-org', 'Organization', NULL, NULL);
		INSERT INTO repositories (id, installation_id, full_name, archived, removed_at) VALUES
			(1, 55501, 'octo-org/hello-world', false, NULL),
			(2, 55501, 'octo-org/removed', false, now()),
			(3, 55501, 'octo-org/attic', true, NULL),
			(4, 55501, 'octo-org/off', false, NULL),
			(5, 55501, 'octo-org/custom', false, NULL),
			(6, 55502, 'frozen-org/app', false, NULL),
			(7, 55503, 'gone-org/app', false, NULL),
			(8, 55504, 'quiet-org/app', false, NULL);
		INSERT INTO installation_release_settings (installation_id, excluded_tag_patterns) VALUES (55501, '{*-rc*}');
		INSERT INTO installation_release_settings (installation_id, workflow_file) VALUES (55504, 'org-release.yml');
		INSERT INTO repository_release_settings (repository_id, enabled) VALUES (4, false);
		INSERT INTO repository_release_settings (repository_id, workflow_file, tag_pattern) VALUES (5, 'ship.yml', 'release-*');`)
	if err != nil {
		o.t.Fatal(err)
	}
}

// startedRun is what the tests read back of a run release-runs create made.
type startedRun struct {
	status, ref, headSHA, workflowFile string
	installation                       int64
	attempts, audits                   int
	checkRunCreate                     outbox.Effect
	payload                            map[string]any
}

func (o *ops) startedRun(id string) startedRun {
	o.t.Helper()
	var r startedRun
	if err := o.pool.QueryRow(o.ctx, `SELECT r.status, r.ref, r.head_sha, r.workflow_file, r.installation_id,
			(SELECT count(*) FROM execution_attempts a WHERE a.release_run_id = r.id AND a.number = 1),
			(SELECT count(*) FROM control_plane_audit c WHERE c.release_run_id = r.id AND c.action = 'release_run.start'
				AND c.operator = 'alice' AND c.reason = 'tags pushed together' AND c.subject_type = 'release_run'
				AND c.from_status = 'none' AND c.to_status = 'check_pending')
		FROM release_runs r WHERE r.id = $1::uuid`, id).
		Scan(&r.status, &r.ref, &r.headSHA, &r.workflowFile, &r.installation, &r.attempts, &r.audits); err != nil {
		o.t.Fatalf("run %s: %v", id, err)
	}
	var effectID int64
	if err := o.pool.QueryRow(o.ctx, `SELECT id FROM control_plane_outbox WHERE release_run_id = $1::uuid AND effect_type = $2`,
		id, outbox.EffectCheckRunCreate).Scan(&effectID); err != nil {
		o.t.Fatalf("run %s has no check-run creation: %v", id, err)
	}
	e, err := outbox.Get(o.ctx, o.pool, effectID)
	if err != nil {
		o.t.Fatal(err)
	}
	r.checkRunCreate = e
	if err := json.Unmarshal(e.Payload, &r.payload); err != nil {
		o.t.Fatal(err)
	}
	return r
}

func TestReleaseRunsCreate(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.env["BOARDREADYOPS_RELEASE_WORKFLOW"] = "deploy.yml" // the deployment's default, as lifecycle reads it
	o.runStartFixture()
	if code, _, errOut := run(t, o.env, "dispatch", "pause", "--installation", "55504", "--reason", "GitHub incident 7"); code != 0 {
		t.Fatalf("pause: %d %s", code, errOut)
	}
	create := func(repo, tag, commit string) []string {
		return []string{"release-runs", "create", "--repo", repo, "--tag", tag, "--commit", commit, "--reason", "tags pushed together", "-o", "json"}
	}
	// The payload of a push's check-run creation (boardreadyops_release_run_create_from_push).
	pushKeys := []string{"dispatch_paused", "external_id", "head_sha", "installation_id", "name", "ref", "release_run_id",
		"repository_full_name", "repository_id", "tag"}
	var first string // the run of octo-org/hello-world v1.4.2 at commitA
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
		check    func(t *testing.T, id string)
	}{
		{"creates the run, its check-run creation and one audit row", create("octo-org/hello-world", "v1.4.2", commitA), 0, `"created": true`,
			func(t *testing.T, id string) {
				first = id
				r := o.startedRun(id)
				if r.status != "check_pending" || r.ref != "refs/tags/v1.4.2" || r.headSHA != commitA || r.workflowFile != "deploy.yml" ||
					r.installation != 55501 || r.attempts != 1 || r.audits != 1 {
					t.Fatalf("run %+v; want check_pending, refs/tags/v1.4.2 at %s, deploy.yml (the deployment's default), attempt 1, one audit row", r, commitA)
				}
				keys := slices.Sorted(maps.Keys(r.payload))
				if r.checkRunCreate.Status != outbox.StatusAvailable || !slices.Equal(keys, pushKeys) || r.payload["tag"] != "v1.4.2" ||
					r.payload["head_sha"] != commitA || r.payload["name"] != "BoardReadyOps release" || r.payload["dispatch_paused"] != nil ||
					r.payload["repository_full_name"] != "octo-org/hello-world" || r.payload["external_id"] != id {
					t.Fatalf("check-run creation %+v payload %v; want a push's (keys %v)", r.checkRunCreate, r.payload, pushKeys)
				}
				// The dispatchers take it from there as from a push: the check run's creation
				// enqueues the dispatch of the run's workflow.
				dispatchID, err := o.st.CompleteCheckRunCreate(o.ctx, o.pool, o.claimFor(id, outbox.EffectCheckRunCreate), "w", 4001)
				if err != nil {
					t.Fatal(err)
				}
				d, err := outbox.Get(o.ctx, o.pool, dispatchID)
				if err != nil || d.EffectType != outbox.EffectWorkflowDispatch || !strings.Contains(string(d.Payload), `"workflow_file": "deploy.yml"`) {
					t.Fatalf("dispatch %+v (%v)", d, err)
				}
			}},
		{"the same tag at the same commit creates nothing", create("octo-org/hello-world", "refs/tags/v1.4.2", commitA), 0, `"created": false`,
			func(t *testing.T, id string) {
				if id != first {
					t.Fatalf("repeat named run %s, want %s", id, first)
				}
				var runs, audits int
				if err := o.pool.QueryRow(o.ctx, `SELECT (SELECT count(*) FROM release_runs WHERE repository_id = 1),
					(SELECT count(*) FROM control_plane_audit WHERE action = 'release_run.start')`).Scan(&runs, &audits); err != nil || runs != 1 || audits != 1 {
					t.Fatalf("%d runs, %d audit rows after the repeat (%v); want 1 and 1", runs, audits, err)
				}
			}},
		{"the same tag at the same commit, in words", []string{"release-runs", "create", "--repo", "octo-org/hello-world", "--tag", "v1.4.2",
			"--commit", commitA, "--reason", "again"}, 0, "already has its run", nil},
		{"the workflow file from the repository's setting", create("octo-org/custom", "release-7", commitB), 0, `"workflow_file": "ship.yml"`,
			func(t *testing.T, id string) {
				if r := o.startedRun(id); r.workflowFile != "ship.yml" || r.headSHA != commitB || r.audits != 1 {
					t.Fatalf("run %+v; want ship.yml (the repository's setting) at %s", r, commitB)
				}
			}},
		{"a paused installation's run notes the pause", create("quiet-org/app", "v3.0.0", commitA), 0, `"dispatch_paused": "GitHub incident 7"`,
			func(t *testing.T, id string) {
				r := o.startedRun(id)
				if r.payload["dispatch_paused"] != "GitHub incident 7" || r.workflowFile != "org-release.yml" || r.audits != 1 {
					t.Fatalf("run %+v payload %v; want the pause noted and org-release.yml (the installation's default)", r, r.payload)
				}
			}},
		{"a paused installation's run, in words", []string{"release-runs", "create", "--repo", "quiet-org/app", "--tag", "v3.0.1",
			"--commit", commitA, "--reason", "tags pushed together"}, 0, "dispatches are paused (GitHub incident 7)", nil},
		{"refuses a removed repository", create("octo-org/removed", "v1.0.0", commitA), 1, "repository octo-org/removed is not installed", nil},
		{"refuses a suspended installation", create("frozen-org/app", "v1.0.0", commitA), 1, "installation 55502 (frozen-org) of repository frozen-org/app is not active: it is suspended", nil},
		{"refuses an uninstalled installation", create("gone-org/app", "v1.0.0", commitA), 1, "the App was uninstalled", nil},
		{"refuses an archived repository", create("octo-org/attic", "v1.0.0", commitA), 1, "repository octo-org/attic is archived", nil},
		{"refuses a disabled repository", create("octo-org/off", "v1.0.0", commitA), 1, "releases are disabled for repository octo-org/off", nil},
		{"refuses a tag outside the pattern", create("octo-org/hello-world", "nightly-1", commitA), 1, `starts no release: it does not match the tag pattern "v*"`, nil},
		{"refuses a tag outside the repository's pattern", create("octo-org/custom", "v1.0.0", commitA), 1, `does not match the tag pattern "release-*"`, nil},
		{"refuses an excluded tag", create("octo-org/hello-world", "v2.0.0-rc1", commitA), 1, `it matches the excluded tag pattern "*-rc*"`, nil},
		{"refuses a malformed SHA", create("octo-org/hello-world", "v1.5.0", "abc123"), 2, "--commit \"abc123\": want the tagged commit's SHA", nil},
		{"refuses an uppercase SHA", create("octo-org/hello-world", "v1.5.0", strings.ToUpper("abcdef"+commitA[6:])), 2, "40 or 64 lowercase hexadecimal digits", nil},
		{"refuses a repository not recorded", create("octo-org/unknown", "v1.0.0", commitA), 1, "repository octo-org/unknown is not recorded", nil},
		{"needs a reason", []string{"release-runs", "create", "--repo", "octo-org/hello-world", "--tag", "v1.5.0", "--commit", commitA}, 2, "--reason is required", nil},
	}
	for _, tt := range tests {
		code, out, errOut := run(t, o.env, tt.args...)
		if code != tt.wantCode || !strings.Contains(out+errOut, tt.want) {
			t.Fatalf("%s: exit %d, output %q %q; want %d and %q", tt.name, code, out, errOut, tt.wantCode, tt.want)
		}
		if tt.wantCode == 0 && !strings.Contains(out, "brops release-runs show ") {
			t.Fatalf("%s: %q names no brops release-runs show command", tt.name, out)
		}
		if tt.check != nil {
			var res struct {
				ReleaseRun string `json:"release_run"`
				Show       string `json:"show"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Show != "brops release-runs show "+res.ReleaseRun {
				t.Fatalf("%s: %s (%v)", tt.name, out, err)
			}
			tt.check(t, res.ReleaseRun)
		}
	}
	// A refusal creates nothing and audits nothing.
	var runs, audits int
	if err := o.pool.QueryRow(o.ctx, `SELECT (SELECT count(*) FROM release_runs),
		(SELECT count(*) FROM control_plane_audit WHERE action = 'release_run.start')`).Scan(&runs, &audits); err != nil || runs != 4 || audits != 4 {
		t.Fatalf("%d runs, %d audit rows (%v); want the 4 created", runs, audits, err)
	}
	// show tells the operator's start.
	if code, out, _ := run(t, o.env, "release-runs", "show", first); code != 0 || !strings.Contains(out, "operator: release_run.start") {
		t.Fatalf("show: %d %s", code, out)
	}
}

// The function checks what brops checks before it: a caller other than brops gets the same
// refusals, each naming its rule.
func TestReleaseRunStartFunction(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.runStartFixture()
	start := func(repo int64, tag, sha, operator, reason string, refusal any) error {
		var id string
		var created bool
		return o.pool.QueryRow(o.ctx, `SELECT release_run_id::text, created FROM boardreadyops_release_run_start($1, $2, $3, $4, $5, 'release.yml', 'BoardReadyOps release', $6)`,
			repo, tag, sha, operator, reason, refusal).Scan(&id, &created)
	}
	tests := []struct {
		name                       string
		repo                       int64
		tag, sha, operator, reason string
		refusal                    any
		wantCode, want             string
	}{
		{"short SHA", 1, "v1.0.0", "abc", "alice", "x", nil, "22023", "want the tagged commit's SHA"},
		{"uppercase SHA", 1, "v1.0.0", strings.ToUpper(commitA[:39]) + "A", "alice", "x", nil, "22023", "40 or 64 lowercase hexadecimal digits"},
		{"41 digits", 1, "v1.0.0", commitA + "1", "alice", "x", nil, "22023", "want the tagged commit's SHA"},
		{"a ref, not a tag name", 1, "refs/tags/v1.0.0", commitA, "alice", "x", nil, "22023", "without refs/tags/"},
		{"a tag with a space", 1, "v1 .0", commitA, "alice", "x", nil, "22023", "no spaces"},
		{"no operator", 1, "v1.0.0", commitA, " ", "x", nil, "22023", "operator's identity"},
		{"no reason", 1, "v1.0.0", commitA, "alice", "", nil, "22023", "needs a reason"},
		{"not recorded", 99, "v1.0.0", commitA, "alice", "x", nil, "BR006", "repository 99 is not recorded"},
		{"removed", 2, "v1.0.0", commitA, "alice", "x", nil, "BR003", "is not installed"},
		{"suspended", 6, "v1.0.0", commitA, "alice", "x", nil, "BR003", "it is suspended"},
		{"uninstalled", 7, "v1.0.0", commitA, "alice", "x", nil, "BR003", "the App was uninstalled"},
		{"archived", 3, "v1.0.0", commitA, "alice", "x", nil, "BR003", "is archived"},
		{"disabled", 4, "v1.0.0", commitA, "alice", "x", nil, "BR003", "releases are disabled"},
		{"the caller's tag refusal", 1, "nightly", commitA, "alice", "x", "it does not match the tag pattern \"v*\"", "BR003", "tag nightly of repository octo-org/hello-world starts no release: it does not match"},
		// The rules in the push path's order: an archived repository is refused as archived
		// before its tag is looked at.
		{"archived before the tag", 3, "nightly", commitA, "alice", "x", "it does not match the tag pattern \"v*\"", "BR003", "is archived"},
	}
	for _, tt := range tests {
		err := start(tt.repo, tt.tag, tt.sha, tt.operator, tt.reason, tt.refusal)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != tt.wantCode || !strings.Contains(pgErr.Message, tt.want) {
			t.Errorf("%s: %v; want SQLSTATE %s and %q", tt.name, err, tt.wantCode, tt.want)
		}
	}
	var runs int
	if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FROM release_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("%d runs after refusals (%v)", runs, err)
	}
	// Executable by the admin role only (PUBLIC: pkg/migrate TestNoFunctionExecutableByPublic).
	for role, want := range map[string]bool{"boardreadyops_admin": true, "boardreadyops_lifecycle": false, "boardreadyops_dispatcher": false,
		"boardreadyops_ingest": false, "boardreadyops_operator": false, "boardreadyops_redeliver": false} {
		var may bool
		if err := o.pool.QueryRow(o.ctx, `SELECT has_function_privilege($1,
			'public.boardreadyops_release_run_start(bigint, text, text, text, text, text, text, text, timestamptz)', 'EXECUTE')`, role).Scan(&may); err != nil || may != want {
			t.Errorf("%s may execute boardreadyops_release_run_start: %v (%v), want %v", role, may, err, want)
		}
	}
}
