// Command demo drives the local run's demonstration: it plays GitHub's part with signed webhooks
// sent to ingest — an installation with a repository, a release tag that succeeds, a release tag
// whose first run fails, and "Re-run" on that failed check run — and reports each release run's
// progress from the database until all are finished, then prints a summary table.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

const (
	installationID = 70001
	repository     = "demo-org/rocket"
)

// repositoryID is the id the simulator gives the repository it creates on first use, so that its
// workflow_run webhooks name the repository the demo's pushes did.
var repositoryID = githubsim.RepositoryID(repository)

func main() {
	ingestURL := flag.String("ingest-url", "http://127.0.0.1:18080/webhook", "ingest webhook URL")
	secretFile := flag.String("secret-file", ".data/dev/webhook-secret", "webhook secret file")
	dbURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "database to watch")
	appID := flag.Int64("app-id", 1, "the App id (check runs of other apps are not re-run)")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	err := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		return run(ctx, *ingestURL, *secretFile, *dbURL, *appID)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	url    string
	secret []byte
	conn   *pgx.Conn
	appID  int64
}

func run(ctx context.Context, ingestURL, secretFile, dbURL string, appID int64) error {
	raw, err := os.ReadFile(secretFile)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	d := &demo{url: ingestURL, secret: []byte(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])), conn: conn, appID: appID}

	stamp := time.Now().Unix()
	good, flaky := fmt.Sprintf("v1.%d.0", stamp), fmt.Sprintf("v1.%d.1-fail", stamp)
	owner := map[string]any{"login": "demo-org", "type": "Organization"}
	repo := map[string]any{"id": repositoryID, "name": "rocket", "full_name": repository, "default_branch": "main", "owner": owner}
	// As in GitHub's payloads, the installation carries when it changed: each make run's
	// installation event is a new body, not a replay of the previous run's (which ingest answers
	// 200 and does not store, docs/security.md).
	inst := map[string]any{"id": installationID, "account": owner, "app_id": appID,
		"updated_at": time.Unix(stamp, 0).UTC().Format(time.RFC3339)}

	step("GitHub: App installed on demo-org with demo-org/rocket")
	if err := d.send(ctx, "installation", map[string]any{"action": "created", "installation": inst,
		"repositories": []any{map[string]any{"id": repositoryID, "full_name": repository}}}); err != nil {
		return err
	}
	for _, tag := range []string{good, flaky} {
		step("GitHub: tag " + tag + " pushed to " + repository)
		// The commit the simulator's tag points at (githubsim --auto-tags): the dispatcher reads it
		// before each dispatch.
		if err := d.send(ctx, "push", map[string]any{"ref": "refs/tags/" + tag, "before": strings.Repeat("0", 40),
			"after":   githubsim.AutoTagCommit(repository, tag),
			"created": true, "deleted": false, "repository": repo, "installation": map[string]any{"id": installationID}}); err != nil {
			return err
		}
	}

	rerun := false
	last := map[string]string{}
	for {
		runs, err := d.runs(ctx, good, flaky)
		if err != nil {
			return err
		}
		for _, r := range runs {
			state := fmt.Sprintf("%s (attempt %d)", r.Status, r.Attempt)
			if last[r.Tag] != state {
				last[r.Tag] = state
				step(fmt.Sprintf("release %-22s %s", r.Tag, state))
			}
		}
		if f, ok := find(runs, flaky); ok && f.Status == "failed" && f.Attempt == 1 && !rerun {
			step("GitHub: someone presses \"Re-run\" on the failed check run of " + flaky)
			if err := d.send(ctx, "check_run", map[string]any{"action": "rerequested", "repository": repo,
				"installation": map[string]any{"id": installationID},
				"check_run": map[string]any{"id": f.CheckRunID, "external_id": f.ID, "name": "BoardReadyOps release", "head_sha": githubsim.AutoTagCommit(repository, flaky),
					"status": "completed", "conclusion": "failure", "app": map[string]any{"id": appID}}}); err != nil {
				return err
			}
			rerun = true
		}
		if g, ok := find(runs, good); ok && g.Status == "succeeded" && rerun {
			if f, ok := find(runs, flaky); ok && f.Attempt == 2 && (f.Status == "succeeded" || f.Status == "failed") && d.effectsDone(ctx) {
				return d.summary(ctx, runs)
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("the demonstration did not finish in time; see .data/logs/*.log")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func step(s string) { fmt.Printf("%s  %s\n", time.Now().Format("15:04:05.000"), s) }

func (d *demo) send(ctx context.Context, event string, payload map[string]any) error {
	body, _ := json.Marshal(payload)
	var id [16]byte
	_, _ = rand.Read(id[:])
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", hex.EncodeToString(id[:]))
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(d.secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("send %s webhook: %w", event, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("send %s webhook: ingest answered %s", event, resp.Status)
	}
	return nil
}

type releaseRun struct {
	ID, Tag, Status string
	Attempt         int
	CheckRunID      int64
	WorkflowRuns    string
}

func (d *demo) runs(ctx context.Context, tags ...string) ([]releaseRun, error) {
	refs := make([]string, len(tags))
	for i, t := range tags {
		refs[i] = "refs/tags/" + t
	}
	rows, err := d.conn.Query(ctx, `
		SELECT r.id::text, substr(r.ref, 11), r.status, r.current_attempt, coalesce(r.check_run_id, 0),
		       coalesce((SELECT string_agg(a.number || ':' || coalesce(a.workflow_run_id::text, '-') || ' ' || a.status, ', ' ORDER BY a.number)
		                 FROM execution_attempts a WHERE a.release_run_id = r.id), '')
		FROM release_runs r WHERE r.repository_id = $1 AND r.ref = ANY($2) ORDER BY r.created_at`, repositoryID, refs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (releaseRun, error) {
		var r releaseRun
		err := row.Scan(&r.ID, &r.Tag, &r.Status, &r.Attempt, &r.CheckRunID, &r.WorkflowRuns)
		return r, err
	})
}

func find(runs []releaseRun, tag string) (releaseRun, bool) {
	for _, r := range runs {
		if r.Tag == tag {
			return r, true
		}
	}
	return releaseRun{}, false
}

// effectsDone: every effect of the demo's installation is terminal.
func (d *demo) effectsDone(ctx context.Context) bool {
	var open int
	_ = d.conn.QueryRow(ctx, `SELECT count(*) FROM control_plane_outbox WHERE installation_id = $1 AND status IN ('available', 'leased')`,
		installationID).Scan(&open)
	return open == 0
}

func (d *demo) summary(ctx context.Context, runs []releaseRun) error {
	var effects, deliveries, jobs int
	_ = d.conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM control_plane_outbox WHERE installation_id = $1 AND status = 'completed'),
		(SELECT count(*) FROM webhook_inbox WHERE installation_id = $1),
		(SELECT count(*) FROM control_plane_jobs j JOIN webhook_inbox i ON i.id = j.inbox_id WHERE i.installation_id = $1 AND j.status = 'completed')`,
		installationID).Scan(&effects, &deliveries, &jobs)
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RELEASE RUN\tTAG\tSTATUS\tATTEMPTS\tCHECK RUN\tWORKFLOW RUNS (attempt:run status)")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.Tag, r.Status, r.Attempt, r.CheckRunID, r.WorkflowRuns)
	}
	_ = tw.Flush()
	fmt.Printf("\nDemo installation so far (all local runs): %d webhooks accepted, %d jobs completed, %d GitHub effects delivered.\n", deliveries, jobs, effects)
	return nil
}
