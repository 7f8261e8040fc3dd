package e2e_test

import (
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// EnvPreviousRef names the git revision whose binaries TestPreviousBinariesOnNewSchema runs;
// the default is HEAD^ (on main, the first parent: the product before the newest change).
const EnvPreviousRef = "BOARDREADYOPS_PREVIOUS_REF"

// TestPreviousBinariesOnNewSchema proves the rolling-upgrade rule (docs/upgrading.md): during a
// roll the previous release's ingest, lifecycle and outbox-dispatcher run against the schema the
// new release's pre-upgrade hook migrated. It builds those binaries from the previous revision
// (a detached git worktree of it, built with its own go.work), migrates a database with this
// tree's migrations, and runs the release loop with them: every delivery processed, every run
// succeeded, one check run and one dispatch each.
func TestPreviousBinariesOnNewSchema(t *testing.T) {
	t.Parallel()
	ref := cmp.Or(os.Getenv(EnvPreviousRef), "HEAD^")
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("this test builds the previous revision from git history and needs a git checkout: %v", err)
	}
	rev, err := exec.Command("git", "rev-parse", "--verify", ref+"^{commit}").Output()
	if err != nil {
		t.Fatalf("resolve %s=%s: %v", EnvPreviousRef, ref, err)
	}
	src := filepath.Join(t.TempDir(), "previous")
	if out, err := exec.Command("git", "-C", strings.TrimSpace(string(root)), "worktree", "add", "--detach", src, strings.TrimSpace(string(rev))).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("git", "-C", strings.TrimSpace(string(root)), "worktree", "remove", "--force", src).Run()
	})
	bin := t.TempDir()
	for _, name := range []string{"ingest", "lifecycle", "outbox-dispatcher"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./services/"+name)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(src, "go.work"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the previous %s (%s): %v\n%s", name, strings.TrimSpace(string(rev))[:12], err, out)
		}
	}
	dbURL := pgtest.NewURL(t) // migrated with this tree's migrations
	elapsed := releaseLoop(t, bin, dbURL, dbURL, nil, 12)
	t.Logf("previous binaries (%s) on the new schema: 12 releases in %v", strings.TrimSpace(string(rev))[:12], elapsed)
}
