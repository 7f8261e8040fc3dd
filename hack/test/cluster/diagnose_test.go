//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/hack/cluster/node"
)

// logTail is how many lines of each container's log a failed run prints; the whole logs stay in
// the cluster directory's logs/pods, which cluster-down keeps.
const logTail = 60

// dumpPodLogsOnFailure registers a cleanup that, when the test has failed, prints the pods'
// state and the tail of every container's log in the test namespace. Register it after
// PostgreSQL is started: it then runs before PostgreSQL and the cluster stop, and the tails show
// the failure rather than the shutdown.
func dumpPodLogsOnFailure(t *testing.T, c node.Config) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := c.Kubectl(ctx, "-n", namespace, "get", "pods", "-o", "wide"); err == nil {
			t.Logf("pods at the failure:\n%s", out)
		}
		// The kubelet writes every container's log under <dir>/logs/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log.
		dirs, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "pods", namespace+"_*", "*"))
		sort.Strings(dirs)
		for _, d := range dirs {
			files, _ := filepath.Glob(filepath.Join(d, "*.log"))
			sort.Strings(files)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
				if len(lines) > logTail {
					lines = lines[len(lines)-logTail:]
				}
				t.Logf("log %s (last %d lines):\n%s", strings.TrimPrefix(f, c.Dir+"/"), len(lines), strings.Join(lines, "\n"))
			}
		}
	})
}

// dumpQueuesOnFailure registers a cleanup that, when the test has failed, prints the jobs and
// effects that are not completed, grouped by state, kind and last error. Register it after
// PostgreSQL is started, so that it runs before PostgreSQL stops.
func dumpQueuesOnFailure(t *testing.T, pg *postgres) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, q := range []struct{ what, sql string }{
			{"jobs not completed", `SELECT j.status, i.event, j.attempts, left(coalesce(j.last_error, ''), 300), count(*)
				FROM control_plane_jobs j JOIN webhook_inbox i ON i.id = j.inbox_id WHERE j.status <> 'completed'
				GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC LIMIT 20`},
			{"effects not completed", `SELECT status, effect_type, attempts, left(coalesce(last_error, ''), 300), count(*)
				FROM control_plane_outbox WHERE status <> 'completed' GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC LIMIT 20`},
			{"release runs", `SELECT status, '', 0, '', count(*) FROM release_runs GROUP BY 1 ORDER BY 5 DESC`},
		} {
			rows, err := pg.admin.Query(ctx, q.sql)
			if err != nil {
				t.Logf("%s: %v", q.what, err)
				continue
			}
			var out []string
			for rows.Next() {
				var status, kind, lastError string
				var attempts, n int
				if err := rows.Scan(&status, &kind, &attempts, &lastError, &n); err != nil {
					t.Logf("%s: %v", q.what, err)
					break
				}
				out = append(out, fmt.Sprintf("%6d  %s %s attempts=%d %s", n, status, kind, attempts, lastError))
			}
			rows.Close()
			t.Logf("%s:\n%s", q.what, strings.Join(out, "\n"))
		}
	})
}
