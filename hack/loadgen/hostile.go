package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boardreadyops/cloud/pkg/hubsig"
)

// hostileResult is one hostile-client run against ingest (docs/performance.md, "Hostile clients").
type hostileResult struct {
	Seconds float64 `json:"seconds"`
	// Attackers at once, by kind.
	HeaderOnly int `json:"header_only"`
	Tricklers  int `json:"tricklers"`
	Stallers   int `json:"stallers"`
	Idle       int `json:"idle_keepalive"`
	// Attack connections opened over the run (each reconnects when cut off).
	AttackConnections int64 `json:"attack_connections"`
	// The genuine sender's deliveries: sent, answered 202, and the slowest answer.
	Sent      int64   `json:"genuine_sent"`
	Accepted  int64   `json:"genuine_accepted"`
	Late      int64   `json:"genuine_over_10s"`
	Failed    int64   `json:"genuine_failed"`
	P50ms     float64 `json:"genuine_p50_ms"`
	P99ms     float64 `json:"genuine_p99_ms"`
	MaxMs     float64 `json:"genuine_max_ms"`
	PeakRSS   int64   `json:"peak_rss_bytes"`
	RSSAtEnd  int64   `json:"rss_at_end_bytes"`
	PeakVmHWM int64   `json:"vm_hwm_bytes"`
}

func runHostile(args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	target := fs.String("url", "http://127.0.0.1:8080/webhook", "ingest webhook URL")
	secretFile := fs.String("secret-file", "", "webhook secrets file (the first secret signs)")
	pid := fs.Int("pid", 0, "ingest's process id, for its resident memory (/proc/PID/status); 0: not measured")
	headerOnly := fs.Int("header-only", 200, "connections that send headers announcing 25 MiB and then nothing")
	tricklers := fs.Int("tricklers", 200, "connections that send a 25 MiB-announced body at 256 bytes/s")
	stallers := fs.Int("stallers", 0, "connections that send all but the last byte of a 1 MiB body fast, then stop")
	idle := fs.Int("idle", 200, "keep-alive connections that send one request and then stay idle")
	senders := fs.Int("senders", 4, "concurrent genuine senders (signed push deliveries)")
	duration := fs.Duration("duration", 30*time.Second, "how long the attack lasts")
	jsonOut := fs.Bool("json", false, "print JSON instead of a summary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 10*time.Minute {
		return fmt.Errorf("duration must be in (0, 10m]")
	}
	for _, n := range []int{*headerOnly, *tricklers, *stallers, *idle} {
		if n < 0 || n > 5000 {
			return fmt.Errorf("attacker counts must be 0 to 5000")
		}
	}
	secret, err := signingSecret(*secretFile)
	if err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil {
		return err
	}
	res := hostileResult{HeaderOnly: *headerOnly, Tricklers: *tricklers, Stallers: *stallers, Idle: *idle}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	var rss rssSampler
	if *pid > 0 {
		go rss.run(ctx, *pid)
	}
	var conns atomic.Int64
	var wg sync.WaitGroup
	attack := func(n int, f func(ctx context.Context, c net.Conn)) {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
					if err != nil {
						sleepCtx(ctx, 100*time.Millisecond)
						continue
					}
					conns.Add(1)
					stop := context.AfterFunc(ctx, func() { c.Close() })
					f(ctx, c)
					stop()
					c.Close()
				}
			}()
		}
	}
	head := func(length int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"+
			"X-GitHub-Delivery: hostile-%d\r\nX-Hub-Signature-256: sha256=%064x\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, time.Now().UnixNano(), 0, length)
	}
	// Header-only: announce the maximum and send nothing; wait to be cut off.
	attack(*headerOnly, func(ctx context.Context, c net.Conn) {
		if _, err := c.Write([]byte(head(25 << 20))); err == nil {
			_, _ = bufio.NewReader(c).ReadByte()
		}
	})
	// Tricklers: 64 bytes every 250 ms of an announced 25 MiB.
	attack(*tricklers, func(ctx context.Context, c net.Conn) {
		if _, err := c.Write([]byte(head(25 << 20))); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte(" "), 64)
		for ctx.Err() == nil {
			if _, err := c.Write(chunk); err != nil {
				return
			}
			sleepCtx(ctx, 250*time.Millisecond)
		}
	})
	// Stallers: all but the last byte of 1 MiB at once, then silence.
	attack(*stallers, func(ctx context.Context, c net.Conn) {
		const n = 1 << 20
		if _, err := c.Write([]byte(head(n))); err != nil {
			return
		}
		if _, err := c.Write(bytes.Repeat([]byte(" "), n-1)); err == nil {
			_, _ = bufio.NewReader(c).ReadByte()
		}
	})
	// Idle keep-alives: one cheap request (405), then hold the connection.
	attack(*idle, func(ctx context.Context, c net.Conn) {
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.Path, u.Host); err != nil {
			return
		}
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			drainClose(resp.Body)
			_, _ = br.ReadByte() // blocks until the server closes the idle connection
		}
	})

	// The genuine senders, each on its own keep-alive connection, as GitHub would.
	sleepCtx(ctx, time.Second) // let the attack take hold first
	template := pushBody()
	var sent, accepted, late, failed atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	start := time.Now()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var seq atomic.Int64
	var gw sync.WaitGroup
	for s := 0; s < *senders; s++ {
		gw.Add(1)
		go func() {
			defer gw.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for ctx.Err() == nil {
				id := fmt.Sprintf("genuine-%s-%d", run, seq.Add(1))
				body := bytes.Replace(template, []byte(deliveryMark), []byte(id), 1)
				req, _ := http.NewRequest(http.MethodPost, *target, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "push")
				req.Header.Set("X-GitHub-Delivery", id)
				req.Header.Set("X-Hub-Signature-256", hubsig.Sign(secret, body))
				t0 := time.Now()
				resp, err := client.Do(req)
				d := time.Since(t0)
				sent.Add(1)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				switch {
				case err != nil:
					failed.Add(1)
					if d >= 10*time.Second {
						late.Add(1)
					}
					continue
				case d >= 10*time.Second:
					late.Add(1)
				}
				drainClose(resp.Body)
				if resp.StatusCode == http.StatusAccepted {
					accepted.Add(1)
				} else {
					failed.Add(1)
				}
				sleepCtx(ctx, 20*time.Millisecond)
			}
		}()
	}
	gw.Wait()
	res.Seconds = time.Since(start).Seconds()
	cancel()
	wg.Wait()

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	res.AttackConnections = conns.Load()
	res.Sent, res.Accepted, res.Late, res.Failed = sent.Load(), accepted.Load(), late.Load(), failed.Load()
	res.P50ms, res.P99ms, res.MaxMs = pct(0.5), pct(0.99), pct(1)
	if *pid > 0 {
		res.PeakRSS, res.RSSAtEnd = rss.peak.Load(), procStatus(*pid, "VmRSS")
		res.PeakVmHWM = procStatus(*pid, "VmHWM")
	}
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("hostile: %.0fs; attackers at once: %d header-only (25 MiB announced), %d tricklers, %d stallers, %d idle keep-alive; %d attack connections\n",
		res.Seconds, res.HeaderOnly, res.Tricklers, res.Stallers, res.Idle, res.AttackConnections)
	fmt.Printf("  genuine: sent %d, 202 %d, failed %d, over 10s %d; latency p50 %.1fms p99 %.1fms max %.1fms\n",
		res.Sent, res.Accepted, res.Failed, res.Late, res.P50ms, res.P99ms, res.MaxMs)
	if *pid > 0 {
		fmt.Printf("  ingest RSS: peak %.0f MiB (sampled every 100ms; VmHWM %.0f MiB), at end %.0f MiB\n",
			float64(res.PeakRSS)/(1<<20), float64(res.PeakVmHWM)/(1<<20), float64(res.RSSAtEnd)/(1<<20))
	}
	if res.Accepted != res.Sent || res.Late > 0 {
		return fmt.Errorf("%d of %d genuine deliveries not answered 202 within 10 s", res.Sent-res.Accepted, res.Sent)
	}
	return nil
}

// rssSampler keeps the highest VmRSS seen.
type rssSampler struct{ peak atomic.Int64 }

func (r *rssSampler) run(ctx context.Context, pid int) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if v := procStatus(pid, "VmRSS"); v > r.peak.Load() {
			r.peak.Store(v)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// procStatus reads one "kB" field of /proc/PID/status, in bytes (0 when unreadable).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
