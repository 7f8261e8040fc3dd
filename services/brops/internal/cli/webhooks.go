package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/githubapp"
)

// githubDeliveryHistory is how long GitHub keeps an App's webhook deliveries.
const githubDeliveryHistory = 72 * time.Hour

// sinceFlag is redeliver's --since: a period back from now ("6h") or a fixed start (an RFC 3339
// time), which a command printed once and run again later still means (brops restore fence
// prints one: the restore point less its margin).
type sinceFlag struct {
	period time.Duration
	at     time.Time
}

func (f *sinceFlag) String() string {
	if !f.at.IsZero() {
		return f.at.UTC().Format(time.RFC3339)
	}
	return f.period.String()
}

func (f *sinceFlag) Set(v string) error {
	if at, err := time.Parse(time.RFC3339, v); err == nil {
		*f = sinceFlag{at: at}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want a period such as 6h or an RFC 3339 time such as 2026-12-03T09:00:00Z")
	}
	*f = sinceFlag{period: d}
	return nil
}

func (f *sinceFlag) Type() string { return "period|time" }

// start is where the deliveries to look at begin, seen at now; it refuses a start in the future
// or beyond GitHub's history.
func (f *sinceFlag) start(now time.Time) (time.Time, error) {
	start := f.at
	if start.IsZero() {
		start = now.Add(-f.period)
	}
	if !start.Before(now) || now.Sub(start) > githubDeliveryHistory {
		return time.Time{}, fmt.Errorf("--since %v: want a start in the last 72h (GitHub keeps deliveries 3 days)", f)
	}
	return start, nil
}

// redelivery is one failed delivery and what was done about it.
type redelivery struct {
	GUID        string    `json:"guid"`
	AttemptID   int64     `json:"attempt_id"`
	Event       string    `json:"event"`
	Action      string    `json:"action,omitempty"`
	DeliveredAt time.Time `json:"delivered_at"`
	StatusCode  int       `json:"status_code"`
	Result      string    `json:"result"` // requested, would_request, failed
	Error       string    `json:"error,omitempty"`
}

// receivedDeliveries returns which of guids reached ingest: stored in the inbox, or ignored with
// their body digest recorded under their GUID. Digests are read from notBefore on (less an hour
// for the clocks of GitHub and the database), through their received_at index.
func receivedDeliveries(ctx context.Context, pool *pgxpool.Pool, guids []string, notBefore time.Time) (map[string]bool, error) {
	received := map[string]bool{}
	if len(guids) == 0 {
		return received, nil
	}
	rows, err := pool.Query(ctx, `SELECT delivery_id FROM webhook_inbox WHERE delivery_id = ANY($1)
		UNION
		SELECT delivery_id FROM webhook_body_digests WHERE received_at >= $2 AND delivery_id = ANY($1)`,
		guids, notBefore.Add(-time.Hour))
	if err != nil {
		return nil, fmt.Errorf("read the inbox and body digests: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the inbox and body digests: %w", err)
	}
	for _, id := range ids {
		received[id] = true
	}
	return received, nil
}

// refusedBody reports whether ingest refused a delivery for its body, which GitHub's redelivery
// sends again unchanged: 422, the database's row rules (docs/webhooks.md, rejected_unstorable). A
// 400 or 413 may come from a proxy or ingress in front of ingest, and a fix of its configuration
// makes a redelivery pass, so those are asked again.
func refusedBody(status int) bool { return status == http.StatusUnprocessableEntity }

func newWebhooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "webhooks", Short: "Work with the App's webhook deliveries on GitHub"}
	since := sinceFlag{period: 6 * time.Hour}
	var maxPages, maxRequests int
	var dryRun, includeDelivered, includeRefused bool
	var apiURL, keyFile string
	var appID int64
	redeliver := &cobra.Command{
		Use:   "redeliver",
		Short: "Ask GitHub to redeliver failed deliveries that never reached the inbox",
		Long: `GitHub never redelivers a failed delivery by itself. This lists the App's deliveries of the
last --since, a period or a fixed RFC 3339 start (GET /app/hook/deliveries, as the App), and for every delivery GUID that has no
successful attempt and that ingest never received (not in webhook_inbox, no body digest recorded
under it), requests one redelivery of its newest attempt (POST
/app/hook/deliveries/{id}/attempts). Ingest deduplicates by GUID, so running it again (or
from a CronJob) is safe; each run requests each missing GUID at most once, and at most
--max-requests in total, the oldest first (run it again for the rest). After a point-in-time
restore, --include-delivered also requests the GUIDs GitHub delivered successfully but the
restored database no longer knows (brops restore fence prints the command), except those
delivered or redelivered with a 2xx answer since the open fence: they reached the restored
deployment's ingest, and one it filtered leaves no row (docs/webhooks.md), so they are not asked
again and repeated runs come to an end. A delivery ingest received but does not store (an event
or action lifecycle ignores) counts as received: its body digest is recorded under its GUID. A
delivery whose newest attempt ingest answered 422 (the database's row rules refuse its body, which
a redelivery sends unchanged) is counted, not asked again, unless --include-refused (after a
release that stores it). Every other failure is asked again: a 400 or 413 may come from a proxy
in front of ingest, a 401 from a secret rotated since.
It says how many a run left for the next: above the table, or on stderr with -o json (whose
stdout is the list of requests). When --max-pages pages do not reach back to --since, it acts on
what it read and exits 1: the window's oldest deliveries were not looked at.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start, err := since.start(time.Now())
			if err != nil {
				return usageError{err}
			}
			if maxPages < 1 || maxRequests < 1 {
				return usageError{fmt.Errorf("--max-pages %d, --max-requests %d: want at least 1 each", maxPages, maxRequests)}
			}
			if appID <= 0 || keyFile == "" {
				return usageError{errors.New("set BOARDREADYOPS_GITHUB_APP_ID and BOARDREADYOPS_GITHUB_PRIVATE_KEY_FILE (or the flags)")}
			}
			key, err := githubapp.ReadPrivateKey(keyFile)
			if err != nil {
				return err
			}
			gh, err := githubapp.New(githubapp.Config{AppID: appID, PrivateKey: key, BaseURL: apiURL, Timeout: 20 * time.Second})
			if err != nil {
				return err
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			attempts, truncated, err := gh.ListHookDeliveries(cmd.Context(), start, maxPages)
			if err != nil {
				return err
			}
			// After a restore, a GUID delivered or redelivered with a 2xx answer since the open
			// restore fence has reached the restored deployment's ingest (the runbook keeps every
			// service at 0 from before the restore until after the fence): stored, ignored or
			// filtered (a filtered delivery leaves no row at all, docs/webhooks.md), asking again
			// cannot change what it did. With no fence open, none is taken as arrived.
			var fencedAt *time.Time
			if includeDelivered {
				if err := pool.QueryRow(cmd.Context(), `SELECT max(fenced_at) FROM restore_fences WHERE closed_at IS NULL`).Scan(&fencedAt); err != nil {
					return fmt.Errorf("read the restore fences: %w", err)
				}
			}
			// Per GUID: did any attempt succeed, did one since the open fence, and which attempt
			// is the newest.
			type state struct {
				ok, arrived bool
				newest      githubapp.HookDelivery
			}
			byGUID := map[string]*state{}
			for _, a := range attempts {
				s := byGUID[a.GUID]
				if s == nil {
					s = &state{newest: a}
					byGUID[a.GUID] = s
				}
				if a.StatusCode >= 200 && a.StatusCode < 300 {
					s.ok = true
					if fencedAt != nil && !a.DeliveredAt.Before(*fencedAt) {
						s.arrived = true
					}
				}
				if a.DeliveredAt.After(s.newest.DeliveredAt) {
					s.newest = a
				}
			}
			var failed []string
			arrived := 0
			for guid, s := range byGUID {
				switch {
				case includeDelivered && s.arrived:
					arrived++
				case !s.ok || includeDelivered:
					failed = append(failed, guid)
				}
			}
			// Deliveries that failed on GitHub's side but reached ingest anyway (e.g. a timeout
			// after the commit) need nothing: those stored are in the inbox, those ignored have
			// their body digest recorded under their GUID. Without the second, every ignored
			// delivery would look missing to --include-delivered at every run, and, oldest first,
			// fill --max-requests before the deliveries a restore really lost.
			received, err := receivedDeliveries(cmd.Context(), pool, failed, start)
			if err != nil {
				return err
			}
			var out []redelivery
			refused := 0
			for _, guid := range failed {
				if received[guid] {
					continue
				}
				n := byGUID[guid].newest
				if refusedBody(n.StatusCode) && !includeRefused {
					refused++
					continue
				}
				out = append(out, redelivery{GUID: guid, AttemptID: n.ID, Event: n.Event, Action: n.Action, DeliveredAt: n.DeliveredAt, StatusCode: n.StatusCode})
			}
			sort.Slice(out, func(i, j int) bool { return out[i].DeliveredAt.Before(out[j].DeliveredAt) })
			left := 0
			if len(out) > maxRequests {
				left = len(out) - maxRequests
				out = out[:maxRequests]
			}
			failures := 0
			for i := range out {
				if dryRun {
					out[i].Result = "would_request"
					continue
				}
				if err := gh.RedeliverHookDelivery(cmd.Context(), out[i].AttemptID); err != nil {
					out[i].Result, out[i].Error = "failed", err.Error()
					failures++
					continue
				}
				out[i].Result = "requested"
			}
			// The counts: above the table, or on stderr beside -o json's list of requests.
			what := "failed and missing from the inbox"
			if includeDelivered {
				what = "missing from the inbox"
			}
			summary := []string{fmt.Sprintf("%d delivery attempts since %s, %d GUIDs, %d %s", len(attempts), start.UTC().Format(time.RFC3339), len(byGUID), len(out)+left, what)}
			if refused > 0 {
				summary = append(summary, fmt.Sprintf("%d answered 422 by ingest (the database refuses their body, which a redelivery repeats): not asked again (--include-refused asks)", refused))
			}
			if arrived > 0 {
				summary = append(summary, fmt.Sprintf("%d delivered since the open restore fence (%s) and answered 2xx: not asked again", arrived, fencedAt.UTC().Format(time.RFC3339)))
			}
			if left > 0 {
				summary = append(summary, fmt.Sprintf("the oldest %d taken (--max-requests); %d left for the next run", len(out), left))
			}
			// Stopped at --max-pages, newest first: the oldest deliveries of the window, those
			// just after a restore point, were never looked at, and a "0 missing" would say
			// nothing about them. It still acts on what it read, and then fails.
			var unread error
			if truncated {
				oldest := start
				if len(attempts) > 0 {
					oldest = attempts[len(attempts)-1].DeliveredAt
				}
				summary = append(summary, fmt.Sprintf("only the newest %d pages read (--max-pages), back to %s: the window's older deliveries were not looked at",
					maxPages, oldest.UTC().Format(time.RFC3339)))
				unread = fmt.Errorf("--max-pages %d did not reach back to --since %s (the oldest attempt read is of %s): raise --max-pages and run it again",
					maxPages, start.UTC().Format(time.RFC3339), oldest.UTC().Format(time.RFC3339))
			}
			if g.output == "json" {
				for _, line := range summary {
					fmt.Fprintf(g.stderr, "brops: %s\n", line)
				}
			}
			if err := g.render(out, func(w io.Writer) {
				for _, line := range summary {
					fmt.Fprintln(w, line)
				}
				if len(out) > 0 {
					fmt.Fprintln(w, "GUID\tEVENT\tDELIVERED\tSTATUS\tRESULT")
				}
				for _, r := range out {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s %s\n", r.GUID, r.Event, r.DeliveredAt.UTC().Format(time.RFC3339), r.StatusCode, r.Result, r.Error)
				}
			}); err != nil {
				return err
			}
			if failures > 0 {
				return errors.Join(fmt.Errorf("%d redelivery requests failed", failures), unread)
			}
			return unread
		},
	}
	redeliver.Flags().Var(&since, "since", "look at deliveries of this period back from now, or since this RFC 3339 time (in the last 72h)")
	redeliver.Flags().IntVar(&maxPages, "max-pages", 50, "read at most this many pages of 100 deliveries")
	redeliver.Flags().IntVar(&maxRequests, "max-requests", 500, "request at most this many redeliveries per run")
	redeliver.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be redelivered, request nothing")
	redeliver.Flags().BoolVar(&includeDelivered, "include-delivered", false, "also GUIDs delivered successfully but missing from the inbox (after a restore)")
	redeliver.Flags().BoolVar(&includeRefused, "include-refused", false, "also GUIDs whose newest attempt ingest answered 422 (the database refused their body)")
	g.githubFlags(redeliver, &apiURL, &appID, &keyFile)
	cmd.AddCommand(redeliver)
	return cmd
}
