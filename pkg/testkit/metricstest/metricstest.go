// Package metricstest scrapes a Prometheus registry the way Prometheus does, through the
// /metrics handler in the text exposition format, for tests that assert which series a process
// exports before anything happened.
package metricstest

import (
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape serves g through promhttp and parses the answer into sample values keyed by series,
// `name{label="value",...}` with the labels sorted by name; histograms give their _bucket,
// _count and _sum series.
func Scrape(tb testing.TB, g prometheus.Gatherer) map[string]float64 {
	tb.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return ParseText(tb, rec.Body.String())
}

// ParseText parses a /metrics answer in the text exposition format as Scrape does.
func ParseText(tb testing.TB, text string) map[string]float64 {
	tb.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		tb.Fatalf("parse /metrics: %v\n%s", err, text)
	}
	series := map[string]float64{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				series[Key(name, labels)] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				series[Key(name, labels)] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				series[Key(name+"_count", labels)] = float64(h.GetSampleCount())
				series[Key(name+"_sum", labels)] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					series[Key(name+"_bucket", with(labels, "le", fmt.Sprint(b.GetUpperBound())))] = float64(b.GetCumulativeCount())
				}
			case m.GetUntyped() != nil:
				series[Key(name, labels)] = m.GetUntyped().GetValue()
			}
		}
	}
	return series
}

// Key is the series key Scrape uses.
func Key(name string, labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%q", n, labels[n])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func with(labels map[string]string, name, value string) map[string]string {
	out := map[string]string{name: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// RequireZero fails tb for each series of name over the cross product of the label sets that is
// missing from scraped or not 0.
func RequireZero(tb testing.TB, scraped map[string]float64, name string, sets map[string][]string) {
	tb.Helper()
	combos := []map[string]string{{}}
	for label, values := range sets {
		var next []map[string]string
		for _, c := range combos {
			for _, v := range values {
				next = append(next, with(c, label, v))
			}
		}
		combos = next
	}
	for _, c := range combos {
		key := Key(name, c)
		v, ok := scraped[key]
		switch {
		case !ok:
			tb.Errorf("%s: not exported by a fresh registry", key)
		case v != 0:
			tb.Errorf("%s = %v on a fresh registry, want 0", key, v)
		}
	}
}
