// Package promapi reads the broker-trigger signals from a Prometheus server's HTTP API (instant
// queries), as an alternative to scraping the dispatcher pods directly.
package promapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds one query response; the queries return a single sample.
const maxBody = 1 << 20

// ErrNoData reports a query that returned no series (nothing matched, or no samples in range).
var ErrNoData = errors.New("query returned no data")

// Query runs an instant query at t and returns the value of its single result: the first sample
// of a vector, or a scalar.
func Query(ctx context.Context, client *http.Client, baseURL, expr string, t time.Time) (float64, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/") + "/api/v1/query")
	if err != nil {
		return 0, fmt.Errorf("prometheus url: %w", err)
	}
	form := url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("prometheus query: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, fmt.Errorf("prometheus query: read: %w", err)
	}
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("prometheus query: HTTP %d, not an API response: %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus query: %s: %s", r.ErrorType, r.Error)
	}
	var pair []any
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return 0, fmt.Errorf("prometheus query: vector: %w", err)
		}
		if len(vec) == 0 {
			return 0, ErrNoData
		}
		pair = vec[0].Value
	case "scalar":
		if err := json.Unmarshal(r.Data.Result, &pair); err != nil {
			return 0, fmt.Errorf("prometheus query: scalar: %w", err)
		}
	default:
		return 0, fmt.Errorf("prometheus query: unexpected result type %q", r.Data.ResultType)
	}
	if len(pair) != 2 {
		return 0, fmt.Errorf("prometheus query: malformed sample %v", pair)
	}
	str, _ := pair[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return 0, fmt.Errorf("prometheus query: sample value %q: %w", str, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, ErrNoData
	}
	return v, nil
}

// Expressions are the three signal queries for a dispatcher selected by selector (label matchers
// without braces), over rateWindow.
type Expressions struct {
	ClaimLatency, Throughput, OldestAge string
}

// Build returns the queries: the claim-latency quantile from the summed bucket rates, the summed
// rate of completed effects, and the largest oldest-available age.
func Build(selector string, quantile float64, rateWindow time.Duration) Expressions {
	w := promDuration(rateWindow)
	return Expressions{
		ClaimLatency: fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(boardreadyops_outbox_claim_duration_seconds_bucket{%s}[%s])))`, quantile, selector, w),
		Throughput:   fmt.Sprintf(`sum(rate(boardreadyops_outbox_effects_processed_total{outcome="completed",%s}[%s]))`, selector, w),
		OldestAge:    fmt.Sprintf(`max(boardreadyops_outbox_oldest_available_effect_age_seconds{%s})`, selector),
	}
}

func promDuration(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
}
