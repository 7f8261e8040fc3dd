// Command preview renders the chart's dashboards to PNG with real data, for docs/img: it reads
// each dashboard's JSON, runs every panel query against a Prometheus (query_range, with the
// dashboard's variables substituted as Grafana would), writes a page that draws the panels at
// their gridPos with uPlot, and screenshots it with headless Chromium. Grafana itself is not
// obtainable here, so the page says it is a preview. hack/dashboards/preview.sh (make
// dashboards-preview) provides the Prometheus, uPlot and Chromium.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

type config struct {
	prometheus, dashboards, out, work, uplot, chromium string
	last, scrapeInterval                               time.Duration
	end                                                string
	width                                              int
}

func main() {
	var c config
	flag.StringVar(&c.prometheus, "prometheus", "http://127.0.0.1:9090", "Prometheus base URL")
	flag.StringVar(&c.dashboards, "dashboards", "charts/boardreadyops/dashboards", "directory of dashboard JSON files")
	flag.StringVar(&c.out, "out", "docs/img", "directory for the PNGs (dashboard-<name>.png)")
	flag.StringVar(&c.work, "work", ".data/preview", "directory for the pages")
	flag.StringVar(&c.uplot, "uplot", ".data/preview/npm/node_modules/uplot/dist", "uPlot's dist directory (npm package uplot)")
	flag.StringVar(&c.chromium, "chromium", "chromium", "Chromium binary")
	flag.DurationVar(&c.last, "last", 6*time.Minute, "time range to show, ending at -end")
	flag.StringVar(&c.end, "end", "", "end of the range, RFC 3339 (default now)")
	flag.DurationVar(&c.scrapeInterval, "scrape-interval", 2*time.Second, "the Prometheus scrape interval ($__rate_interval is derived from it, as Grafana does)")
	flag.IntVar(&c.width, "width", 1500, "page width in pixels")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err := run(ctx, c)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "preview:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	end := time.Now().UTC()
	if c.end != "" {
		t, err := time.Parse(time.RFC3339, c.end)
		if err != nil {
			return fmt.Errorf("parse -end: %w", err)
		}
		end = t.UTC()
	}
	tr := newTimeRange(end.Add(-c.last), end, c.scrapeInterval)
	assets, err := loadAssets(c.uplot)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(c.dashboards, "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no dashboards in %s", c.dashboards)
	}
	prom := &promClient{base: strings.TrimRight(c.prometheus, "/")}
	if err := os.MkdirAll(c.work, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		d, err := readDashboard(f)
		if err != nil {
			return err
		}
		p, err := fill(ctx, prom, d, tr)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		p.Source = filepath.ToSlash(f)
		p.Width = c.width
		name := strings.TrimPrefix(d.UID, "boardreadyops-")
		html := filepath.Join(c.work, "dashboard-"+name+".html")
		if err := writePage(html, p, assets); err != nil {
			return err
		}
		png := filepath.Join(c.out, "dashboard-"+name+".png")
		if err := screenshot(ctx, c.chromium, html, png, c.width, p.height()); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		st, err := os.Stat(png)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d panels, %d without data, %d KiB\n", png, p.panelCount(), p.empty(), st.Size()/1024)
	}
	return nil
}

// screenshot loads the page in headless Chromium and writes the viewport to png.
func screenshot(ctx context.Context, chromium, page, png string, width, height int) error {
	abs, err := filepath.Abs(page)
	if err != nil {
		return err
	}
	out, err := filepath.Abs(png)
	if err != nil {
		return err
	}
	profile, err := os.MkdirTemp("", "preview-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	cmd := exec.CommandContext(ctx, chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
		"--hide-scrollbars", "--force-device-scale-factor=1", "--user-data-dir="+profile,
		"--virtual-time-budget=10000", fmt.Sprintf("--window-size=%d,%d", width, height),
		"--screenshot="+out, "file://"+abs)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chromium: %w\n%s", err, b)
	}
	return nil
}
