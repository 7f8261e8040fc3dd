package migrate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// TestRowCheckPatterns proves that each pattern rewritten for speed in the row checks of 00009
// accepts exactly the strings its original regular expression did: every sample and every string
// one edit away from a sample (each character replaced, deleted, or a character inserted) is run
// through the row check function and through the original expression, and the two must agree.
func TestRowCheckPatterns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgtest.NewPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// passes(call) evaluates a row check call; false when it raises a check violation.
	if _, err := conn.Exec(ctx, `CREATE FUNCTION pg_temp.passes(call text) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN EXECUTE 'SELECT ' || call; RETURN true;
		EXCEPTION WHEN check_violation THEN RETURN false; END $$`); err != nil {
		t.Fatal(err)
	}
	const (
		run = `'11111111-1111-1111-1111-111111111111'::uuid`
		tp  = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"
		sha = "0123456789abcdef0123456789abcdef01234567"
	)
	hex := "0123456789abcdef"
	names := []string{"a", "workflow_run", "installation_repositories", strings.Repeat("a", 63), strings.Repeat("b", 64),
		strings.Repeat("c", 65), "_", "__"}
	traceparents := []string{tp, strings.Replace(tp, "-01", "-0", 1), tp + "0", "0" + tp, strings.ReplaceAll(tp, "-", ""),
		"00-" + strings.Repeat("0", 33) + "-" + strings.Repeat("0", 15) + "-01"}
	shas := []string{sha, strings.Repeat(hex, 4), strings.Repeat("a", 39), strings.Repeat("a", 41), strings.Repeat("b", 63),
		strings.Repeat("b", 65), sha + sha[:24]}
	files := []string{"release.yml", "release.yaml", "a.yml", "x.y.yaml", ".yml", ".yaml", "a.yml.yml", "a.YML", "a.ymlx",
		strings.Repeat("p", 199) + ".yml", strings.Repeat("p", 200) + ".yml", strings.Repeat("p", 201) + ".yml",
		strings.Repeat("p", 200) + ".yaml", strings.Repeat("p", 201) + ".yaml", strings.Repeat("p", 196) + ".yml.yaml",
		strings.Repeat("p", 197) + ".yml.yaml"}
	tests := []struct {
		name     string
		call     string // %s is the candidate, quoted
		original string
		samples  []string
		alphabet string
	}{
		{"webhook_inbox event", `boardreadyops_webhook_validate_row('d', %s, NULL, NULL, NULL, '{}', sha256('x'::bytea), NULL)`,
			`^[a-z_]{1,64}$`, names, "az_A0-. é\n"},
		{"webhook_inbox action", `boardreadyops_webhook_validate_row('d', 'push', %s, NULL, NULL, '{}', sha256('x'::bytea), NULL)`,
			`^[a-z_]{1,64}$`, names[:3], "az_A0-. é"},
		{"control_plane_jobs kind", `boardreadyops_job_validate_row(%s, 'available', 0, 25, NULL, NULL, NULL, NULL, NULL)`,
			`^[a-z_]{1,64}$`, names, "az_Z9-"},
		{"webhook_inbox traceparent", `boardreadyops_webhook_validate_row('d', 'push', NULL, NULL, NULL, '{}', sha256('x'::bytea), %s)`,
			`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`, traceparents, "0f-gA "},
		{"control_plane_jobs traceparent", `boardreadyops_job_validate_row('push', 'available', 0, 25, NULL, NULL, NULL, NULL, %s)`,
			`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`, traceparents[:2], "0-g"},
		{"control_plane_outbox traceparent", `boardreadyops_outbox_validate_row('github.check_run.create',
			'github.check_run.create:' || ` + run + `, 0, '{}', 'available', 0, 10, NULL, NULL, NULL, NULL, NULL, NULL, ` + run + `, NULL, 1, %s)`,
			`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`, traceparents[:2], "0-g"},
		{"release_runs head_sha", `boardreadyops_release_run_validate_row('refs/tags/v1', %s, 'release.yml', 'requested', NULL, 1, NULL)`,
			`^([0-9a-f]{40}|[0-9a-f]{64})$`, shas, "0fgA-"},
		{"release_runs workflow_file", `boardreadyops_release_run_validate_row('refs/tags/v1', '` + sha + `', %s, 'requested', NULL, 1, NULL)`,
			`^[A-Za-z0-9._-]{1,200}\.ya?ml$`, files, "aZ9._-/ y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			corpus := oneEditAway(tt.samples, tt.alphabet)
			rows, err := conn.Query(ctx, `SELECT s, s ~ $2, pg_temp.passes(format($3, quote_literal(s))) FROM unnest($1::text[]) s`,
				corpus, tt.original, tt.call)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n, accepted := 0, 0
			for rows.Next() {
				var s string
				var want, got bool
				if err := rows.Scan(&s, &want, &got); err != nil {
					t.Fatal(err)
				}
				n++
				if got {
					accepted++
				}
				if want != got {
					t.Errorf("%q: original pattern says %v, row check says %v", s, want, got)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if accepted == 0 || accepted == n {
				t.Fatalf("%d of %d accepted: the corpus does not exercise both sides", accepted, n)
			}
		})
	}
}

// oneEditAway returns the samples and every distinct string one edit away from a sample, with
// characters from alphabet.
func oneEditAway(samples []string, alphabet string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, sample := range samples {
		add(sample)
		r := []rune(sample)
		for i := 0; i <= len(r); i++ {
			if i < len(r) {
				add(string(r[:i]) + string(r[i+1:]))
			}
			for _, c := range alphabet {
				if i < len(r) {
					add(string(r[:i]) + string(c) + string(r[i+1:]))
				}
				add(string(r[:i]) + string(c) + string(r[i:]))
			}
		}
	}
	return out
}
