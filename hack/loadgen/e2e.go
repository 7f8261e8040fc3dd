package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

// e2eResult is one end-to-end load run.
type e2eResult struct {
	ReleaseRuns     int                `json:"release_runs"`
	Seconds         float64            `json:"seconds"`
	RunsPerSecond   float64            `json:"release_runs_per_second"`
	Webhooks        int                `json:"webhooks_accepted"`
	WebhooksPerSec  float64            `json:"webhooks_per_second"`
	Effects         int                `json:"effects_completed"`
	EffectsPerSec   float64            `json:"effects_per_second"`
	PushFailures    int64              `json:"push_failures"`
	ToCheckRun      [3]float64         `json:"accepted_to_check_run_created_ms_p50_p95_p99"`
	ToDispatch      [3]float64         `json:"accepted_to_dispatched_ms_p50_p95_p99"`
	ToCompleted     [3]float64         `json:"accepted_to_check_run_completed_ms_p50_p95_p99"`
	ClaimP50ms      float64            `json:"claim_p50_ms"`
	ClaimP99ms      float64            `json:"claim_p99_ms"`
	EffectsPerClaim float64            `json:"effects_per_dispatcher_claim"`
	JobsPerClaim    float64            `json:"jobs_per_lifecycle_claim"`
	PeakRSSMiB      map[string]float64 `json:"peak_rss_mib"`
	CPUSeconds      map[string]float64 `json:"cpu_seconds"`
	CPUPerRunMs     map[string]float64 `json:"cpu_ms_per_run"`
	// RunQueueSeconds is how long each process waited for a core (proccpu.RunQueue).
	RunQueueSeconds map[string]float64 `json:"run_queue_seconds"`
	PgbenchTPS      float64            `json:"pgbench_tps,omitempty"`
	NotTerminal     int                `json:"release_runs_not_terminal"`
	ExactlyOnceFail int                `json:"attempts_with_other_than_one_dispatch"`
	// NeedOperator counts the effects in dead_letter or reconciliation_required: each blocks its
	// run (docs/operations.md has the runbooks).
	NeedOperator int `json:"effects_needing_an_operator"`
	// Stuck lists up to five of them (id, type, status, attempts, last error): what went wrong
	// is then in the burst's own output, not only in logs deleted with it.
	Stuck []string `json:"effects_needing_an_operator_sample,omitempty"`
}

func runE2E(args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	ingestURL := fs.String("ingest-url", "http://127.0.0.1:18080/webhook", "ingest webhook URL")
	secretFile := fs.String("secret-file", "", "webhook secret file (first line signs)")
	dbURL := fs.String("database-url", "", "the product database (read-only use: progress and latencies)")
	runs := fs.Int("runs", 10000, "release runs (tag pushes) to drive")
	repos := fs.Int("repositories", 100, "repositories the tags are spread over")
	installations := fs.Int("installations", 10, "installations the repositories are spread over")
	rate := fs.Float64("rate", 0, "pushes per second (0: as fast as the senders go)")
	concurrency := fs.Int("concurrency", 16, "concurrent senders")
	dispatcherMetrics := fs.String("dispatcher-metrics", "", "dispatcher /metrics URLs, comma-separated, one per replica (claim latency, effects per claim: of all together)")
	lifecycleMetrics := fs.String("lifecycle-metrics", "", "lifecycle /metrics URL (jobs per claim)")
	pids := fs.String("pids", "", "name=pid,… of the services whose peak RSS to report")
	pgbenchURL := fs.String("pgbench-database-url", "", "when set, pgbench -N -c 8 -j 2 on this database after the run")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up after this long")
	stall := fs.Duration("stall", 3*time.Minute, "give up when no release run has finished for this long")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runs < 1 || *runs > 1_000_000 || *repos < 1 || *installations < 1 || *installations > *repos || *concurrency < 1 || *concurrency > 512 {
		return fmt.Errorf("runs 1..1e6, repositories >= 1, installations 1..repositories, concurrency 1..512")
	}
	secret, err := signingSecret(*secretFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())

	postmaster, err := connPostmaster(ctx, conn)
	if err != nil {
		return err
	}
	cpuAtStart, waitAtStart := cpuSeconds(*pids, postmaster), runQueueSeconds(*pids, postmaster)
	start := time.Now()
	failures := sendPushes(ctx, *ingestURL, secret, *runs, *repos, *installations, *rate, *concurrency)
	// Wait until every release run is finished and every effect delivered.
	var res e2eResult
	// While the dispatcher's metrics can tell, wait on its count of completed check-run
	// completions (one per finished run) rather than counting rows: the load tool's own queries
	// would otherwise be a few per cent of PostgreSQL's CPU, growing with the tables. The
	// database has the last word below.
	progressed := time.Now() // when a run last finished, as far as the load tool can tell
	if *dispatcherMetrics != "" {
		last := -1.0
		for ctx.Err() == nil && time.Since(progressed) < *stall {
			c := sumOver(*dispatcherMetrics, func(url string) float64 { return scrapeCounter(url, completedCheckRuns) })
			if c >= float64(*runs-int(failures)) {
				break
			}
			if c > last {
				last, progressed = c, time.Now()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if err := waitFinished(ctx, conn, *runs-int(failures), progressed, *stall, 200*time.Millisecond); err != nil {
		return err
	}
	res.Seconds = time.Since(start).Seconds()
	// Before the latency queries below, which are heavy and would count as PostgreSQL's load.
	res.CPUSeconds = cpuSince(cpuSeconds(*pids, postmaster), cpuAtStart)
	res.RunQueueSeconds = cpuSince(runQueueSeconds(*pids, postmaster), waitAtStart)
	res.PushFailures = failures
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM release_runs), (SELECT count(*) FROM webhook_inbox),
		(SELECT count(*) FROM control_plane_outbox WHERE status = 'completed'),
		(SELECT count(*) FROM release_runs WHERE status NOT IN ('succeeded', 'failed', 'cancelled')),
		(SELECT count(*) FROM (SELECT a.id FROM execution_attempts a LEFT JOIN control_plane_outbox o
			ON o.release_run_id = a.release_run_id AND o.execution_attempt_id = a.id
				AND o.effect_type = 'github.workflow.dispatch' AND o.status = 'completed'
			GROUP BY a.id HAVING count(o.id) <> 1) x),
		(SELECT count(*) FROM control_plane_outbox WHERE status IN ('dead_letter', 'reconciliation_required'))`).
		Scan(&res.ReleaseRuns, &res.Webhooks, &res.Effects, &res.NotTerminal, &res.ExactlyOnceFail, &res.NeedOperator); err != nil {
		return err
	}
	if res.NeedOperator > 0 {
		if res.Stuck, err = stuckEffects(ctx, conn, 5); err != nil {
			return err
		}
	}
	res.RunsPerSecond = float64(res.ReleaseRuns) / res.Seconds
	res.CPUPerRunMs = cpuPerRun(res.CPUSeconds, res.ReleaseRuns)
	res.WebhooksPerSec = float64(res.Webhooks) / res.Seconds
	res.EffectsPerSec = float64(res.Effects) / res.Seconds
	lat := func(q string) ([3]float64, error) {
		var v [3]*float64
		err := conn.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.95) WITHIN GROUP (ORDER BY ms),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) FROM (`+q+`) x`).Scan(&v[0], &v[1], &v[2])
		var out [3]float64
		for i := range v {
			if v[i] != nil {
				out[i] = *v[i]
			}
		}
		return out, err
	}
	// Each run's push: the first push of its (repository, ref), found with one hash join — a
	// correlated lookup per run made these queries quadratic in the load size.
	const pushJoin = ` JOIN (SELECT i.repository_id, i.payload->'push'->>'ref' AS ref, min(i.received_at) AS at
		FROM webhook_inbox i WHERE i.event = 'push' GROUP BY 1, 2) p ON p.repository_id = r.repository_id AND p.ref = r.ref`
	if res.ToCheckRun, err = lat(`SELECT extract(epoch FROM o.completed_at - p.at) * 1000 AS ms FROM release_runs r` + pushJoin + `
		JOIN control_plane_outbox o ON o.release_run_id = r.id AND o.effect_type = 'github.check_run.create' AND o.status = 'completed'`); err != nil {
		return err
	}
	if res.ToDispatch, err = lat(`SELECT extract(epoch FROM a.dispatched_at - p.at) * 1000 AS ms FROM release_runs r` + pushJoin + `
		JOIN execution_attempts a ON a.release_run_id = r.id AND a.number = 1 WHERE a.dispatched_at IS NOT NULL`); err != nil {
		return err
	}
	if res.ToCompleted, err = lat(`SELECT extract(epoch FROM o.completed_at - p.at) * 1000 AS ms FROM release_runs r` + pushJoin + `
		JOIN control_plane_outbox o ON o.release_run_id = r.id AND o.effect_type = 'github.check_run.complete' AND o.status = 'completed'
		-- the final update only: since 00021 a run's check run is also updated to running
		AND coalesce(o.payload->>'state', 'succeeded') IN ('succeeded', 'failed', 'cancelled') AND o.superseded_by IS NULL`); err != nil {
		return err
	}
	if *dispatcherMetrics != "" {
		res.ClaimP50ms, res.ClaimP99ms = scrapeClaimQuantiles(*dispatcherMetrics)
		res.EffectsPerClaim = perClaim(*dispatcherMetrics, "boardreadyops_outbox_effects_processed_total", "boardreadyops_outbox_claim_duration_seconds")
	}
	if *lifecycleMetrics != "" {
		res.JobsPerClaim = perClaim(*lifecycleMetrics, "boardreadyops_lifecycle_jobs_processed_total", "boardreadyops_lifecycle_claim_duration_seconds")
	}
	res.PeakRSSMiB = peakRSS(*pids)
	if *pgbenchURL != "" {
		if res.PgbenchTPS, err = pgbench(*pgbenchURL, 30*time.Second); err != nil {
			return err
		}
	}
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("%d release runs in %.1fs: %.0f runs/s, %.0f webhooks/s accepted, %.0f effects/s delivered (push failures %d)\n",
		res.ReleaseRuns, res.Seconds, res.RunsPerSecond, res.WebhooksPerSec, res.EffectsPerSec, res.PushFailures)
	fmt.Printf("accepted → check run created  p50 %.0f ms  p95 %.0f ms  p99 %.0f ms\n", res.ToCheckRun[0], res.ToCheckRun[1], res.ToCheckRun[2])
	fmt.Printf("accepted → dispatched         p50 %.0f ms  p95 %.0f ms  p99 %.0f ms\n", res.ToDispatch[0], res.ToDispatch[1], res.ToDispatch[2])
	fmt.Printf("accepted → check run complete p50 %.0f ms  p95 %.0f ms  p99 %.0f ms\n", res.ToCompleted[0], res.ToCompleted[1], res.ToCompleted[2])
	fmt.Printf("dispatcher claim latency p50 <= %.1f ms, p99 <= %.1f ms; peak RSS MiB %v\n", res.ClaimP50ms, res.ClaimP99ms, res.PeakRSSMiB)
	fmt.Printf("per claim, empty claims included: %.1f effects (dispatcher), %.1f jobs (lifecycle)\n", res.EffectsPerClaim, res.JobsPerClaim)
	fmt.Printf("CPU seconds used %s\n", formatCPU(res.CPUSeconds, res.Seconds, res.ReleaseRuns))
	if len(res.RunQueueSeconds) > 0 {
		fmt.Printf("waiting for a core, seconds per CPU second (PostgreSQL: live backends, a lower bound): %s\n",
			formatRunQueue(res.RunQueueSeconds, res.CPUSeconds))
	}
	fmt.Printf("not terminal %d (effects needing an operator %d), attempts without exactly one completed dispatch %d",
		res.NotTerminal, res.NeedOperator, res.ExactlyOnceFail)
	if res.PgbenchTPS > 0 {
		fmt.Printf("; pgbench -N -c 8 -j 2 %.0f tps", res.PgbenchTPS)
	}
	fmt.Println()
	for _, e := range res.Stuck {
		fmt.Println("  needs an operator:", e)
	}
	return nil
}

// stuckEffects describes up to limit of the effects in dead_letter or reconciliation_required,
// oldest first: id, type, status, attempts, when a dispatch awaiting reconciliation started its
// delivery, and the last error.
func stuckEffects(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, limit int) ([]string, error) {
	// A dead letter's delivery start is cleared on every retry; a dispatch awaiting reconciliation
	// keeps the one that makes its outcome unknown.
	rows, err := q.Query(ctx, `SELECT format('%s %s %s, attempt %s%s: %s', id, effect_type, status, attempts,
			CASE WHEN status = 'reconciliation_required' THEN ', delivery started ' || coalesce(delivery_started_at::text, 'never') ELSE '' END,
			coalesce(left(last_error, 300), 'no error recorded'))
		FROM control_plane_outbox WHERE status IN ('dead_letter', 'reconciliation_required') ORDER BY id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("effects needing an operator: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// waitFinished waits until want release runs are terminal or blocked and no effect is open: a run
// blocked on an effect that needs an operator (a dispatch that may have been delivered goes to
// reconciliation) never becomes terminal, so the load ends then rather than at the timeout, and
// says how many effects need an operator. It gives up, naming what was left open, when ctx ends
// or when no run has finished for stall since progressed (the last progress the caller saw): a
// burst that stopped moving (a lost webhook leaves its run running for good) is reported then,
// not at the timeout.
func waitFinished(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, want int, progressed time.Time, stall, poll time.Duration) error {
	last := -1
	for {
		var terminal, blocked, open int
		// Its own deadline: at the timeout it still has to say how far the load got.
		qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		// Each count through a partial index (the finished runs', the claim and the lease
		// index): counting open effects with status IN ('available', 'leased') scanned the whole
		// outbox, 0.46 s and 78,600 buffers a call at the end of a 50,000-run burst, counted in
		// PostgreSQL's CPU and the burst's time.
		err := conn.QueryRow(qctx, `SELECT (SELECT count(*) FROM release_runs WHERE status IN ('succeeded', 'failed', 'cancelled')),
			(SELECT count(*) FROM release_runs WHERE status = 'blocked'),
			(SELECT count(*) FROM control_plane_outbox WHERE status = 'available')
				+ (SELECT count(*) FROM control_plane_outbox WHERE status = 'leased')`).Scan(&terminal, &blocked, &open)
		qcancel()
		if err != nil {
			return err
		}
		if terminal+blocked >= want && open == 0 {
			return nil
		}
		if last >= 0 && terminal+blocked > last {
			progressed = time.Now()
		}
		last = terminal + blocked
		why := ""
		switch {
		case ctx.Err() != nil:
			why = "the timeout"
		case time.Since(progressed) >= stall:
			why = fmt.Sprintf("no run finished for %v", stall)
		}
		if why != "" {
			return fmt.Errorf("not finished, %s: %d of %d release runs terminal, %d blocked, %d effects open (%s)",
				why, terminal, want, blocked, open, openEffects(conn))
		}
		time.Sleep(poll)
	}
}

// openEffects describes what a load that did not finish left: its unfinished runs by status, its
// open effects by type and status, and the oldest open effect (attempts, when it is due, its
// lease, its last error), for the report of a timeout.
func openEffects(conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out string
	err := conn.QueryRow(ctx, `SELECT concat_ws('; ',
		'runs ' || (SELECT string_agg(status || ' ' || n, ', ' ORDER BY status) FROM (SELECT status, count(*) AS n FROM release_runs
			WHERE status NOT IN ('succeeded', 'failed', 'cancelled') GROUP BY status) r),
		'effects ' || (SELECT string_agg(effect_type || ' ' || status || ' ' || n, ', ' ORDER BY effect_type, status) FROM (SELECT effect_type, status, count(*) AS n
			FROM control_plane_outbox WHERE status IN ('available', 'leased') GROUP BY effect_type, status) e),
		(SELECT format('oldest open: %s %s %s, attempt %s, due %s, lease until %s: %s', id, effect_type, status, attempts, available_at,
			coalesce(lease_expires_at::text, 'none'), coalesce(left(last_error, 300), 'no error recorded'))
		FROM control_plane_outbox WHERE status IN ('available', 'leased') ORDER BY id LIMIT 1))`).Scan(&out)
	if err != nil {
		return "open effects not read: " + err.Error()
	}
	return out
}

// sendPushes sends n signed release-tag pushes over repos repositories of installations
// installations and returns the failures.
func sendPushes(ctx context.Context, url string, secret []byte, n, repos, installations int, rate float64, concurrency int) int64 {
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	jobs := make(chan int, concurrency)
	var failures atomic.Int64
	var wg sync.WaitGroup
	stamp := time.Now().UnixNano()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if !postPush(ctx, client, url, secret, stamp, i, repos, installations) {
					failures.Add(1)
				}
			}
		}()
	}
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if tick != nil {
			<-tick
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return failures.Load()
}

// postPush sends release-tag push i (tag v1.i.0 of repository i mod repos) and reports whether
// it was answered 202.
func postPush(ctx context.Context, client *http.Client, url string, secret []byte, stamp int64, i, repos, installations int) bool {
	r := i % repos
	tag, fullName := fmt.Sprintf("v1.%d.0", i), fmt.Sprintf("load-org-%d/repo-%d", r%installations, r)
	body, _ := json.Marshal(map[string]any{
		// At the commit the simulator's tag points at (githubsim --auto-tags), which the dispatcher
		// reads before each dispatch.
		"ref": "refs/tags/" + tag, "before": strings.Repeat("0", 40),
		"after": githubsim.AutoTagCommit(fullName, tag), "created": true, "deleted": false,
		"installation": map[string]any{"id": 60000 + r%installations},
		"repository": map[string]any{"id": githubsim.RepositoryID(fmt.Sprintf("load-org-%d/repo-%d", r%installations, r)), "name": fmt.Sprintf("repo-%d", r),
			"full_name":      fmt.Sprintf("load-org-%d/repo-%d", r%installations, r),
			"default_branch": "main", "owner": map[string]any{"login": fmt.Sprintf("load-org-%d", r%installations), "type": "Organization"}},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("load-%x-%d", stamp, i))
	req.Header.Set("X-Hub-Signature-256", hubsig.Sign(secret, body))
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	drainClose(resp.Body)
	return resp.StatusCode == http.StatusAccepted
}

// metricsClient scrapes the dispatcher; a hung endpoint must not hang the load tool.
var metricsClient = &http.Client{Timeout: 5 * time.Second}

// completedCheckRuns is the dispatcher's sample of check-run updates delivered (a run has two
// since migration 00021; the wait on it is only a first, cheap one: the database decides).
const completedCheckRuns = `boardreadyops_outbox_effects_processed_total{effect_type="github.check_run.complete",outcome="completed"} `

// scrapeCounter returns the value of the sample line starting with prefix (name and labels), or
// -1 when the endpoint or the sample is missing.
func scrapeCounter(url, prefix string) float64 {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return -1
	}
	defer drainClose(resp.Body)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

var bucketLine = regexp.MustCompile(`^boardreadyops_outbox_claim_duration_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)`)

// sumOver adds one figure read from each of the comma-separated URLs (the replicas of a service);
// -1 when any cannot be read.
func sumOver(urls string, read func(url string) float64) float64 {
	total := 0.0
	for _, url := range strings.Split(urls, ",") {
		v := read(url)
		if v < 0 {
			return -1
		}
		total += v
	}
	return total
}

// perClaim is the count of a processed-items counter (every label) over the count of a claim
// latency histogram (every claim, the empty ones too): how many items one claim brought on
// average. Each claim and each batch completion has a fixed cost, so this is what the batching
// settings buy; -1 when the metrics cannot be read.
func perClaim(urls, processed, claimHistogram string) float64 {
	items := sumOver(urls, func(url string) float64 { return scrapeSum(url, processed, "") })
	claims := sumOver(urls, func(url string) float64 { return scrapeCounter(url, claimHistogram+"_count ") })
	if items < 0 || claims <= 0 {
		return -1
	}
	return items / claims
}

// scrapeClaimQuantiles reads the dispatchers' claim latency histograms (comma-separated URLs, one
// per replica; their buckets added) and returns the p50 and p99 upper bucket bounds in
// milliseconds.
func scrapeClaimQuantiles(urls string) (float64, float64) {
	type bucket struct{ le, count float64 }
	counts := map[float64]float64{}
	for _, url := range strings.Split(urls, ",") {
		if !scrapeClaimBuckets(url, counts) {
			return -1, -1
		}
	}
	var bs []bucket
	for le, c := range counts {
		bs = append(bs, bucket{le, c})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return -1, -1
	}
	total := bs[len(bs)-1].count
	q := func(p float64) float64 {
		for _, b := range bs {
			if b.count >= p*total {
				return b.le * 1000
			}
		}
		return -1
	}
	return q(0.5), q(0.99)
}

// scrapeClaimBuckets adds one dispatcher's claim latency buckets to counts (+Inf as 1e9 s).
func scrapeClaimBuckets(url string, counts map[float64]float64) bool {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return false
	}
	defer drainClose(resp.Body)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := bucketLine.FindStringSubmatch(sc.Text()); m != nil {
			le, err1 := strconv.ParseFloat(m[1], 64)
			c, err2 := strconv.ParseFloat(m[2], 64)
			if m[1] == "+Inf" {
				le, err1 = 1e9, nil
			}
			if err1 == nil && err2 == nil {
				counts[le] += c
			}
		}
	}
	return sc.Err() == nil
}

// peakRSS reads VmHWM (peak resident set) of each name=pid.
func peakRSS(spec string) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Split(spec, ",") {
		name, pid, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		b, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				out[name] = kb / 1024
			}
		}
	}
	return out
}
