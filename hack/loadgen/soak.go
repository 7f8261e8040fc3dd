package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// soakTables are the tables whose size and vacuum state a soak samples: every table that gains
// rows per delivery or per release run (execution_attempt_workflow_runs: one per dispatched
// attempt, deleted with it).
var soakTables = []string{"webhook_inbox", "webhook_body_digests", "control_plane_jobs", "control_plane_outbox",
	"release_runs", "execution_attempts", "execution_attempt_workflow_runs", "control_plane_audit"}

// tableSample is one table's state at a slice boundary (pg_stat_user_tables, cumulative counters).
type tableSample struct {
	TotalBytes  int64 `json:"total_bytes"`
	LiveTuples  int64 `json:"live_tuples"`
	DeadTuples  int64 `json:"dead_tuples"`
	Autovacuums int64 `json:"autovacuum_count"`
	Vacuums     int64 `json:"vacuum_count"`
	Updates     int64 `json:"updates"`
	HOTUpdates  int64 `json:"hot_updates"`
}

// soakSlice is one tenth of a soak: what happened between two boundaries, and the tables at its end.
type soakSlice struct {
	Slice          int                    `json:"slice"`
	Runs           int64                  `json:"release_runs_completed"`
	Webhooks       int64                  `json:"webhooks_answered"`
	Seconds        float64                `json:"seconds"`
	RunsPerSecond  float64                `json:"release_runs_per_second"`
	WebhooksPerSec float64                `json:"webhooks_per_second"`
	JobClaim       [2]float64             `json:"lifecycle_claim_ms_p50_p99"`
	EffectClaim    [2]float64             `json:"dispatcher_claim_ms_p50_p99"`
	PostgresCPUms  float64                `json:"postgres_cpu_ms_per_release_run"`
	Tables         map[string]tableSample `json:"tables"`
}

type soakResult struct {
	Webhooks    int64       `json:"webhooks_answered"`
	ReleaseRuns int64       `json:"release_runs_completed"`
	Seconds     float64     `json:"seconds"`
	Slices      []soakSlice `json:"slices"`
	// Last slice against the first.
	ThroughputRatio  float64 `json:"throughput_last_to_first"`
	JobClaimP99Ratio float64 `json:"lifecycle_claim_p99_last_to_first"`
	EffectP99Ratio   float64 `json:"dispatcher_claim_p99_last_to_first"`
	PushFailures     int64   `json:"push_failures"`
}

// soakProbe reads the services' metrics and the database at a slice boundary.
type soakProbe struct {
	conn                                 *pgx.Conn
	ingestMetrics, lifecycle, dispatcher string
	postmaster                           int
}

type soakPoint struct {
	at                 time.Time
	runs, webhooks     float64
	jobClaim, effClaim []bucket
	postgresCPU        float64
	tables             map[string]tableSample
}

func runSoak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	ingestURL := fs.String("ingest-url", "http://127.0.0.1:18081/webhook", "ingest webhook URL")
	secretFile := fs.String("secret-file", "", "webhook secret file (first line signs)")
	dbURL := fs.String("database-url", "", "the product database (statistics views only)")
	webhooks := fs.Int("webhooks", 100_000, "webhooks to drive: each release run is a tag push and its workflow run's 3 webhooks")
	repos := fs.Int("repositories", 100, "repositories the tags are spread over")
	installations := fs.Int("installations", 10, "installations the repositories are spread over")
	concurrency := fs.Int("concurrency", 16, "concurrent senders")
	maxOpen := fs.Int("max-open", 400, "release runs in flight at most (pushed, not completed): the closed loop that makes throughput measurable")
	ingestMetrics := fs.String("ingest-metrics", "", "ingest /metrics URL (webhooks answered)")
	lifecycleMetrics := fs.String("lifecycle-metrics", "", "lifecycle /metrics URL (job claim latency)")
	dispatcherMetrics := fs.String("dispatcher-metrics", "", "dispatcher /metrics URL (completed runs, effect claim latency)")
	timeout := fs.Duration("timeout", 12*time.Hour, "give up after this long")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	runs := (*webhooks + 3) / 4
	if runs < 10 || runs > 2_000_000 || *repos < 1 || *installations < 1 || *installations > *repos || *concurrency < 1 || *maxOpen < *concurrency {
		return fmt.Errorf("webhooks 40..8e6, repositories >= 1, installations 1..repositories, max-open >= concurrency")
	}
	if *dispatcherMetrics == "" || *lifecycleMetrics == "" || *ingestMetrics == "" {
		return fmt.Errorf("--ingest-metrics, --lifecycle-metrics and --dispatcher-metrics are required")
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
	p := &soakProbe{conn: conn, ingestMetrics: *ingestMetrics, lifecycle: *lifecycleMetrics, dispatcher: *dispatcherMetrics,
		postmaster: postmaster}

	var completed atomic.Int64
	first, err := p.sample(ctx)
	if err != nil {
		return err
	}
	base := first.runs
	completed.Store(0)

	// The pusher: at most maxOpen runs between their push and their check run's completion.
	sender := newPushSender(*ingestURL, secret, *repos, *installations, *concurrency)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < runs && ctx.Err() == nil; i++ {
			for ctx.Err() == nil && int64(i)-completed.Load() >= int64(*maxOpen) {
				time.Sleep(5 * time.Millisecond)
			}
			sender.send(ctx, i)
		}
		sender.close()
	}()

	var res soakResult
	prev := first
	start := first.at
	for k := 1; k <= 10; k++ {
		target := float64(runs) * float64(k) / 10
		for {
			c := scrapeCounter(*dispatcherMetrics, completedCheckRuns) - base
			completed.Store(int64(c))
			if c >= target-float64(sender.failures.Load()) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("slice %d not finished: %.0f of %d release runs completed", k, c, runs)
			}
			time.Sleep(200 * time.Millisecond)
		}
		cur, err := p.sample(ctx)
		if err != nil {
			return err
		}
		res.Slices = append(res.Slices, sliceBetween(k, prev, cur))
		prev = cur
	}
	wg.Wait()
	res.Seconds = prev.at.Sub(start).Seconds()
	res.ReleaseRuns = int64(prev.runs - first.runs)
	res.Webhooks = int64(prev.webhooks - first.webhooks)
	res.PushFailures = sender.failures.Load()
	f, l := res.Slices[0], res.Slices[len(res.Slices)-1]
	res.ThroughputRatio = ratio(l.RunsPerSecond, f.RunsPerSecond)
	res.JobClaimP99Ratio = ratio(l.JobClaim[1], f.JobClaim[1])
	res.EffectP99Ratio = ratio(l.EffectClaim[1], f.EffectClaim[1])
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	printSoak(res)
	return nil
}

// ratio is a/b, or 0 when either slice observed nothing (-1) or b is 0.
func ratio(a, b float64) float64 {
	if a < 0 || b <= 0 {
		return 0
	}
	return a / b
}

func (p *soakProbe) sample(ctx context.Context) (soakPoint, error) {
	pt := soakPoint{at: time.Now(), tables: map[string]tableSample{}}
	pt.runs = scrapeCounter(p.dispatcher, completedCheckRuns)
	pt.webhooks = scrapeSum(p.ingestMetrics, "boardreadyops_ingest_deliveries_total", `result="accepted"`, `result="filtered"`)
	pt.jobClaim = scrapeBuckets(p.lifecycle, "boardreadyops_lifecycle_claim_duration_seconds")
	pt.effClaim = scrapeBuckets(p.dispatcher, "boardreadyops_outbox_claim_duration_seconds")
	pt.postgresCPU = cpuSeconds("", p.postmaster)["postgres"]
	rows, err := p.conn.Query(ctx, `SELECT relname::text, pg_total_relation_size(relid), n_live_tup, n_dead_tup, autovacuum_count, vacuum_count,
		n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = ANY($1)`, soakTables)
	if err != nil {
		return pt, fmt.Errorf("sample tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var t tableSample
		if err := rows.Scan(&name, &t.TotalBytes, &t.LiveTuples, &t.DeadTuples, &t.Autovacuums, &t.Vacuums, &t.Updates, &t.HOTUpdates); err != nil {
			return pt, err
		}
		pt.tables[name] = t
	}
	return pt, rows.Err()
}

func sliceBetween(k int, a, b soakPoint) soakSlice {
	s := soakSlice{Slice: k, Runs: int64(b.runs - a.runs), Webhooks: int64(b.webhooks - a.webhooks), Seconds: b.at.Sub(a.at).Seconds(), Tables: b.tables}
	s.RunsPerSecond = float64(s.Runs) / s.Seconds
	s.WebhooksPerSec = float64(s.Webhooks) / s.Seconds
	s.JobClaim = [2]float64{quantile(a.jobClaim, b.jobClaim, 0.5), quantile(a.jobClaim, b.jobClaim, 0.99)}
	s.EffectClaim = [2]float64{quantile(a.effClaim, b.effClaim, 0.5), quantile(a.effClaim, b.effClaim, 0.99)}
	if s.Runs > 0 {
		s.PostgresCPUms = 1000 * (b.postgresCPU - a.postgresCPU) / float64(s.Runs)
	}
	return s
}

// bucket is one cumulative histogram bucket.
type bucket struct{ le, count float64 }

// scrapeBuckets reads an unlabelled histogram's cumulative buckets, sorted by bound (+Inf last).
func scrapeBuckets(url, name string) []bucket {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return nil
	}
	defer drainClose(resp.Body)
	prefix := name + `_bucket{le="`
	var bs []bucket
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		bound, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		le, err1 := strconv.ParseFloat(bound, 64) // "+Inf" parses as +Inf
		c, err2 := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err1 == nil && err2 == nil {
			bs = append(bs, bucket{le, c})
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	return bs
}

// quantile estimates the q-quantile in milliseconds of the observations between two scrapes of
// one histogram, interpolating linearly inside the bucket as Prometheus's histogram_quantile does
// (a quantile in the +Inf bucket reports the highest finite bound). -1 when nothing was observed.
func quantile(before, after []bucket, q float64) float64 {
	if len(after) == 0 {
		return -1
	}
	prevCount := map[float64]float64{}
	for _, b := range before {
		prevCount[b.le] = b.count
	}
	delta := make([]bucket, len(after))
	for i, b := range after {
		delta[i] = bucket{b.le, b.count - prevCount[b.le]}
	}
	total := delta[len(delta)-1].count
	if total <= 0 {
		return -1
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range delta {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower * 1000
			}
			if b.count == below {
				return b.le * 1000
			}
			return 1000 * (lower + (b.le-lower)*(rank-below)/(b.count-below))
		}
		lower, below = b.le, b.count
	}
	return lower * 1000
}

// scrapeSum adds the samples of name whose labels contain one of the matches.
func scrapeSum(url, name string, matches ...string) float64 {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return -1
	}
	defer drainClose(resp.Body)
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, m := range matches {
			if strings.Contains(line, m) {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err == nil {
					sum += v
				}
				break
			}
		}
	}
	return sum
}

func printSoak(r soakResult) {
	fmt.Printf("soak: %d webhooks answered, %d release runs completed in %.0fs (push failures %d)\n",
		r.Webhooks, r.ReleaseRuns, r.Seconds, r.PushFailures)
	fmt.Println("slice  runs/s  webhooks/s  lifecycle claim p50/p99 ms  dispatcher claim p50/p99 ms  PG CPU ms/run")
	for _, s := range r.Slices {
		fmt.Printf("%5d  %6.0f  %10.0f  %12.2f / %-10.2f  %13.2f / %-10.2f  %13.2f\n", s.Slice, s.RunsPerSecond, s.WebhooksPerSec,
			s.JobClaim[0], s.JobClaim[1], s.EffectClaim[0], s.EffectClaim[1], s.PostgresCPUms)
	}
	fmt.Printf("last/first: throughput %.2f×, lifecycle claim p99 %.2f×, dispatcher claim p99 %.2f×\n",
		r.ThroughputRatio, r.JobClaimP99Ratio, r.EffectP99Ratio)
	fmt.Println("total relation size (MiB) per slice; dead tuples, autovacuums, vacuums, HOT share of updates at the end:")
	for _, name := range soakTables {
		var b strings.Builder
		for _, s := range r.Slices {
			fmt.Fprintf(&b, " %7.1f", float64(s.Tables[name].TotalBytes)/(1<<20))
		}
		end := r.Slices[len(r.Slices)-1].Tables[name]
		hot := 0.0
		if end.Updates > 0 {
			hot = 100 * float64(end.HOTUpdates) / float64(end.Updates)
		}
		fmt.Printf("%-22s%s | dead %d, autovacuum %d, vacuum %d, HOT %.0f%%\n", name, b.String(), end.DeadTuples, end.Autovacuums, end.Vacuums, hot)
	}
	fmt.Println("dead tuples per slice (autovacuum runs so far):")
	for _, name := range soakTables {
		var b strings.Builder
		for _, s := range r.Slices {
			fmt.Fprintf(&b, " %7d (%d)", s.Tables[name].DeadTuples, s.Tables[name].Autovacuums)
		}
		fmt.Printf("%-22s%s\n", name, b.String())
	}
}

// pushSender sends release-tag pushes from a pool of senders.
type pushSender struct {
	jobs     chan int
	wg       sync.WaitGroup
	failures atomic.Int64
}

func newPushSender(url string, secret []byte, repos, installations, concurrency int) *pushSender {
	s := &pushSender{jobs: make(chan int, concurrency)}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	stamp := time.Now().UnixNano()
	for w := 0; w < concurrency; w++ {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for i := range s.jobs {
				if !postPush(context.Background(), client, url, secret, stamp, i, repos, installations) {
					s.failures.Add(1)
				}
			}
		}()
	}
	return s
}

func (s *pushSender) send(ctx context.Context, i int) {
	select {
	case s.jobs <- i:
	case <-ctx.Done():
	}
}

func (s *pushSender) close() {
	close(s.jobs)
	s.wg.Wait()
}
