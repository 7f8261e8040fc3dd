package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReposSettings(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.enqueueDispatch() // records installation 55501 and octo-org/hello-world
	const repo = "octo-org/hello-world"
	steps := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"repos", "settings", "get", repo}, 0, "tag_pattern v* default"},
		{[]string{"repos", "settings", "set", repo, "--tag-pattern", "release-*"}, 2, "--reason is required"},
		{[]string{"repos", "settings", "set", repo, "--reason", "x"}, 2, "nothing to set"},
		{[]string{"repos", "settings", "set", repo, "--tag-pattern", "v[", "--reason", "x"}, 2, "is not a valid pattern"},
		{[]string{"repos", "settings", "set", repo, "--exclude", "*-rc[", "--reason", "x"}, 2, "--exclude \"*-rc[\" is not a valid pattern"},
		{[]string{"repos", "settings", "set", repo, "--workflow-file", "../evil.yml", "--reason", "x"}, 2, "--workflow-file"},
		{[]string{"repos", "settings", "set", "octo-org/unknown", "--enabled=false", "--reason", "x"}, 1, "repository octo-org/unknown is not recorded"},
		{[]string{"repos", "settings", "set", "--installation", "999", "--enabled=false", "--reason", "x"}, 1, "installation 999 is not recorded"},
		{[]string{"repos", "settings", "get"}, 2, "give a repository OWNER/NAME"},
		{[]string{"repos", "settings", "set", "--installation", "55501", "--tag-pattern", "release-*", "--exclude", "*-rc*", "--reason", "org convention"}, 0, "installation 55501"},
		{[]string{"repos", "settings", "set", repo, "--workflow-file", "ship.yml", "--reason", "renamed"}, 0, "ship.yml"},
		{[]string{"repos", "settings", "get", repo}, 0, "tag_pattern release-* installation"},
		{[]string{"repos", "settings", "get", repo}, 0, "workflow_file ship.yml this level"},
		{[]string{"repos", "settings", "unset", repo, "--reason", "x"}, 2, "nothing to unset"},
		{[]string{"repos", "settings", "unset", repo, "--workflow-file", "--reason", "back to the default"}, 0, "{}"},
		{[]string{"repos", "settings", "get", repo}, 0, "workflow_file boardreadyops-release.yml default"},
	}
	for _, s := range steps {
		code, out, errOut := run(t, o.env, s.args...)
		if code != s.wantCode || !strings.Contains(strings.Join(strings.Fields(out+errOut), " "), s.want) {
			t.Fatalf("%v: exit %d %q %q, want %d and %q", s.args, code, out, errOut, s.wantCode, s.want)
		}
	}
	var rows int
	if err := o.pool.QueryRow(o.ctx, `SELECT count(*) FROM repository_release_settings`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d repository rows after unsetting the only setting (%v), want 0", rows, err)
	}
	var tp string
	var excluded []string
	if err := o.pool.QueryRow(o.ctx, `SELECT tag_pattern, excluded_tag_patterns FROM installation_release_settings WHERE installation_id = 55501`).
		Scan(&tp, &excluded); err != nil || tp != "release-*" || len(excluded) != 1 || excluded[0] != "*-rc*" {
		t.Fatalf("installation row %q %v (%v)", tp, excluded, err)
	}
	rowsA, err := o.pool.Query(o.ctx, `SELECT action, subject_type, evidence::text FROM control_plane_audit WHERE action LIKE 'release_settings.%' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rowsA.Close()
	var got []string
	for rowsA.Next() {
		var action, subject, evidence string
		_ = rowsA.Scan(&action, &subject, &evidence)
		var ev struct{ Before, After map[string]any }
		if json.Unmarshal([]byte(evidence), &ev) != nil {
			t.Fatalf("evidence %s", evidence)
		}
		got = append(got, action+" "+subject)
	}
	if strings.Join(got, ", ") != "release_settings.set installation, release_settings.set repository, release_settings.unset repository" {
		t.Fatalf("audit rows: %v", got)
	}
}
