package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/hubsig"
)

// postmasterOf finds the PostgreSQL server's postmaster: the parent of this session's backend.
func postmasterOf(ctx context.Context, dbURL string) (int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return -1, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	return connPostmaster(ctx, conn)
}

// ingestResult is one load run against ingest.
type ingestResult struct {
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Sent        int64   `json:"sent"`
	Accepted    int64   `json:"accepted"`
	// Filtered of the accepted were answered "filtered" (not stored).
	Filtered  int64   `json:"filtered"`
	Failed    int64   `json:"failed"`
	PerSecond float64 `json:"accepted_per_second"`
	P50ms     float64 `json:"p50_ms"`
	P95ms     float64 `json:"p95_ms"`
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	// PgbenchTPS is `pgbench -N` on the same server in the same run (0 when not measured).
	PgbenchTPS float64 `json:"pgbench_tps,omitempty"`
	Ratio      float64 `json:"ratio_to_pgbench,omitempty"`
	// PostgresCPUms and IngestCPUms per 1,000 deliveries answered 202 (0 when not measured).
	PostgresCPUms float64 `json:"postgres_cpu_ms_per_1000,omitempty"`
	IngestCPUms   float64 `json:"ingest_cpu_ms_per_1000,omitempty"`
}

func runIngest(args []string) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080/webhook", "ingest webhook URL")
	secretFile := fs.String("secret-file", "", "webhook secrets file (the first secret signs)")
	concurrency := fs.Int("concurrency", 64, "concurrent senders")
	duration := fs.Duration("duration", 60*time.Second, "how long to send")
	pgbenchURL := fs.String("pgbench-database-url", "", "when set, measure pgbench -N -c 8 -j 2 on this database after the load")
	pgbenchTime := fs.Duration("pgbench-duration", 30*time.Second, "pgbench run length")
	runs := fs.Int("runs", 1, "repeat load (and pgbench) this many times and report each and the medians")
	jsonOut := fs.Bool("json", false, "print JSON instead of a table")
	mixName := fs.String("mix", "release-tags", "deliveries to send, in turn: "+mixNames())
	dbURL := fs.String("database-url", "", "when set, measure the PostgreSQL server's CPU (its postmaster is found through this database)")
	ingestPID := fs.String("ingest-pid", "", "when set, measure this ingest process's CPU")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mix, ok := mixes[*mixName]
	if !ok {
		return fmt.Errorf("unknown --mix %q (want %s)", *mixName, mixNames())
	}
	postmaster := -1
	if *dbURL != "" {
		var err error
		if postmaster, err = postmasterOf(context.Background(), *dbURL); err != nil {
			return err
		}
	}
	pids := ""
	if *ingestPID != "" {
		pids = "ingest=" + *ingestPID
	}
	if *duration <= 0 || *duration > 10*time.Minute || *concurrency < 1 || *concurrency > 1024 {
		return fmt.Errorf("duration must be in (0, 10m] and concurrency in [1, 1024]")
	}
	secret, err := signingSecret(*secretFile)
	if err != nil {
		return err
	}

	if *runs < 1 || *runs > 9 {
		return fmt.Errorf("runs must be 1 to 9")
	}
	var all []ingestResult
	for i := 0; i < *runs; i++ {
		before := cpuSeconds(pids, postmaster)
		res, err := loadIngest(context.Background(), *url, secret, *concurrency, *duration, mix())
		if err != nil {
			return err
		}
		used := cpuSince(cpuSeconds(pids, postmaster), before)
		if res.Accepted > 0 {
			res.PostgresCPUms = 1e6 * used["postgres"] / float64(res.Accepted)
			res.IngestCPUms = 1e6 * used["ingest"] / float64(res.Accepted)
		}
		if *pgbenchURL != "" {
			if res.PgbenchTPS, err = pgbench(*pgbenchURL, *pgbenchTime); err != nil {
				return err
			}
			res.Ratio = res.PerSecond / res.PgbenchTPS
		}
		all = append(all, res)
		if !*jsonOut {
			printIngest(fmt.Sprintf("run %d", i+1), res)
		}
	}
	med := medianIngest(all)
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"runs": all, "median": med})
	}
	if *runs > 1 {
		printIngest(fmt.Sprintf("median of %d", *runs), med)
	}
	return nil
}

func printIngest(title string, r ingestResult) {
	fmt.Printf("%s: concurrency %d, %.0fs: sent %d, accepted %d (filtered %d), failed %d\n", title, r.Concurrency, r.Seconds, r.Sent, r.Accepted, r.Filtered, r.Failed)
	fmt.Printf("  accepted/s %.0f   latency p50 %.1fms p95 %.1fms p99 %.1fms max %.1fms\n", r.PerSecond, r.P50ms, r.P95ms, r.P99ms, r.MaxMs)
	if r.PostgresCPUms > 0 || r.IngestCPUms > 0 {
		fmt.Printf("  CPU per 1,000 accepted: postgres %.0f ms, ingest %.0f ms\n", r.PostgresCPUms, r.IngestCPUms)
	}
	if r.PgbenchTPS > 0 {
		fmt.Printf("  pgbench -N -c 8 -j 2: %.0f tps   ratio %.2f\n", r.PgbenchTPS, r.Ratio)
	}
}

// medianIngest takes the median of each figure independently across runs.
func medianIngest(rs []ingestResult) ingestResult {
	m := func(f func(ingestResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	return ingestResult{
		Concurrency:   rs[0].Concurrency,
		Seconds:       m(func(r ingestResult) float64 { return r.Seconds }),
		Sent:          int64(m(func(r ingestResult) float64 { return float64(r.Sent) })),
		Accepted:      int64(m(func(r ingestResult) float64 { return float64(r.Accepted) })),
		Filtered:      int64(m(func(r ingestResult) float64 { return float64(r.Filtered) })),
		Failed:        int64(m(func(r ingestResult) float64 { return float64(r.Failed) })),
		PerSecond:     m(func(r ingestResult) float64 { return r.PerSecond }),
		P50ms:         m(func(r ingestResult) float64 { return r.P50ms }),
		P95ms:         m(func(r ingestResult) float64 { return r.P95ms }),
		P99ms:         m(func(r ingestResult) float64 { return r.P99ms }),
		MaxMs:         m(func(r ingestResult) float64 { return r.MaxMs }),
		PgbenchTPS:    m(func(r ingestResult) float64 { return r.PgbenchTPS }),
		Ratio:         m(func(r ingestResult) float64 { return r.Ratio }),
		PostgresCPUms: m(func(r ingestResult) float64 { return r.PostgresCPUms }),
		IngestCPUms:   m(func(r ingestResult) float64 { return r.IngestCPUms }),
	}
}

// deliveryMark is replaced by each delivery's id in pushBody: ingest accepts a body once (a
// signed body resent under another delivery id is a replay), so every delivery is its own body.
const deliveryMark = "DELIVERY-ID-MARK"

// pushBody is a release-tag push shaped like GitHub's (about 3 KB), with deliveryMark in its
// commit message.
func pushBody() []byte {
	b, _ := json.Marshal(map[string]any{
		"ref": "refs/tags/v1.2.3", "before": strings.Repeat("0", 40), "after": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
		"created": true, "deleted": false, "forced": false, "base_ref": nil,
		"compare":      "https://github.com/octo-org/hello-world/compare/v1.2.3",
		"installation": map[string]any{"id": 55501, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNTU1MDE="},
		"repository": map[string]any{"id": 1296269, "name": "hello-world", "full_name": "octo-org/hello-world",
			"private": false, "default_branch": "main", "archived": false, "description": strings.Repeat("release tooling ", 40),
			"owner": map[string]any{"login": "octo-org", "id": 6811672, "type": "Organization"}},
		"pusher":      map[string]any{"name": "octocat", "email": "mona@example.invalid"},
		"sender":      map[string]any{"login": "octocat", "id": 583231, "type": "User"},
		"head_commit": map[string]any{"id": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "message": deliveryMark + " " + strings.Repeat("Release notes line. ", 60)},
		"commits":     []any{},
	})
	return b
}

func loadIngest(ctx context.Context, url string, secret []byte, concurrency int, duration time.Duration, mix []delivery) (ingestResult, error) {
	client := &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConns: concurrency, MaxIdleConnsPerHost: concurrency, IdleConnTimeout: time.Minute},
	}
	run := fmt.Sprintf("%08x", time.Now().UnixNano()&0xffffffff)
	var seq, sent, accepted, filtered, failed atomic.Int64
	latencies := make([][]time.Duration, concurrency)
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<14)
			for k := w; ctx.Err() == nil; k++ {
				d := mix[k%len(mix)]
				id := fmt.Sprintf("%s-%012d", run, seq.Add(1))
				body := bytes.Replace(d.body, []byte(deliveryMark), []byte(id), 1)
				signature := hubsig.Sign(secret, body)
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", d.event)
				req.Header.Set("X-GitHub-Delivery", id)
				req.Header.Set("X-Hub-Signature-256", signature)
				t0 := time.Now()
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				var answer struct{ Status string }
				_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<12)).Decode(&answer)
				drainClose(resp.Body)
				lat = append(lat, time.Since(t0))
				if resp.StatusCode == http.StatusAccepted {
					accepted.Add(1)
					if answer.Status == "filtered" {
						filtered.Add(1)
					}
				} else {
					failed.Add(1)
				}
			}
			latencies[w] = lat
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	return ingestResult{
		Concurrency: concurrency, Seconds: elapsed, Sent: sent.Load(), Accepted: accepted.Load(), Filtered: filtered.Load(), Failed: failed.Load(),
		PerSecond: float64(accepted.Load()) / elapsed, P50ms: pct(0.50), P95ms: pct(0.95), P99ms: pct(0.99), MaxMs: pct(1),
	}, nil
}
