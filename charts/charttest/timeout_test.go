package charttest

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// timeoutFlag is a helm --timeout in whole minutes, as the chart's notes and docs write it.
var timeoutFlag = regexp.MustCompile(`--timeout (\d+)m\b`)

// timeoutSeconds returns the --timeout of text in seconds, or -1 without one.
func timeoutSeconds(t testing.TB, text string) int {
	t.Helper()
	m := timeoutFlag.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n * 60
}

// TestHelmTimeoutOutlastsTheMigration: Helm waits for a hook Job only --timeout (5m by default),
// less than the migration Job's default deadline (migrations.activeDeadlineSeconds, 600): a long
// migration failed helm upgrade while the Job ran on, and upgrading again deleted the running Job
// (before-hook-creation). NOTES.txt names a --timeout at least a minute longer than the deadline
// set, and every helm install or upgrade command in the chart README, docs/upgrading.md and
// docs/kubernetes.md passes one at least a minute longer than the default deadline.
func TestHelmTimeoutOutlastsTheMigration(t *testing.T) {
	t.Parallel()
	base := readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	for _, deadline := range []int{600, 601, 659, 60, 3600} {
		t.Run(strconv.Itoa(deadline), func(t *testing.T) {
			t.Parallel()
			vals := merge(deepCopy(base), map[string]any{"migrations": map[string]any{"activeDeadlineSeconds": deadline}})
			out, err := render(t, vals, "boardreadyops")
			if err != nil {
				t.Fatal(err)
			}
			notes := out["boardreadyops/templates/NOTES.txt"]
			got := timeoutSeconds(t, notes)
			if got < deadline+60 {
				t.Errorf("NOTES.txt's --timeout is %ds, want at least %ds (deadline %ds + 1m):\n%s", got, deadline+60, deadline, notes)
			}
			if !strings.Contains(notes, strconv.Itoa(deadline)) {
				t.Errorf("NOTES.txt does not name the deadline, %ds:\n%s", deadline, notes)
			}
		})
	}
	// Without the migration Job there is no hook to wait for.
	vals := merge(deepCopy(base), map[string]any{"migrations": map[string]any{"enabled": false}})
	out, err := render(t, vals, "boardreadyops")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out["boardreadyops/templates/NOTES.txt"], "--timeout") {
		t.Errorf("NOTES.txt names a --timeout without the migration Job:\n%s", out["boardreadyops/templates/NOTES.txt"])
	}

	def := readValues(t, filepath.Join(chartDir, "values.yaml"))["migrations"].(map[string]any)["activeDeadlineSeconds"]
	deadline, ok := def.(float64)
	if !ok {
		t.Fatalf("values.yaml: migrations.activeDeadlineSeconds = %v", def)
	}
	for _, doc := range []string{filepath.Join(chartDir, "README.md"), filepath.Join(repoRoot, "docs", "upgrading.md"), filepath.Join(repoRoot, "docs", "kubernetes.md")} {
		cmds := helmCommands(string(readFile(t, doc)))
		if len(cmds) == 0 {
			t.Errorf("%s: no helm install or upgrade command of the chart found", doc)
		}
		for _, c := range cmds {
			if got := timeoutSeconds(t, c); got < int(deadline)+60 {
				t.Errorf("%s: %q: --timeout %ds, want at least %ds (the migration Job's default deadline + 1m)", doc, c, got, int(deadline)+60)
			}
		}
	}
}

// helmCommands returns the helm install and upgrade commands of the chart in a Markdown text,
// continuation lines joined, inline ones cut at their closing backquote.
func helmCommands(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		j := strings.Index(lines[i], "helm install ")
		if k := strings.Index(lines[i], "helm upgrade "); j < 0 || (k >= 0 && k < j) {
			j = k
		}
		if j < 0 {
			continue
		}
		cmd := lines[i][j:]
		for strings.HasSuffix(strings.TrimSpace(cmd), `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(strings.TrimSpace(cmd), `\`) + " " + strings.TrimSpace(lines[i])
		}
		if k := strings.Index(cmd, "`"); k >= 0 {
			cmd = cmd[:k]
		}
		if strings.Contains(cmd, "charts/boardreadyops") {
			out = append(out, cmd)
		}
	}
	return out
}
