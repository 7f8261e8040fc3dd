package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// timeRange is what Grafana would ask for: start, end, a step of about 300 points, and the
// $__rate_interval that follows from it (max(step + scrape interval, 4 × scrape interval)).
type timeRange struct {
	start, end   time.Time
	step, rateIv time.Duration
}

func newTimeRange(start, end time.Time, scrape time.Duration) timeRange {
	step := max(end.Sub(start)/300, scrape).Round(time.Second)
	return timeRange{start: start, end: end, step: step, rateIv: max(step+scrape, 4*scrape)}
}

type promClient struct{ base string }

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func (c *promClient) get(ctx context.Context, path string, q url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s %s: %s", path, q.Get("query"), env.Error)
	}
	return json.Unmarshal(env.Data, into)
}

// queryRange runs one panel query over the range.
func (c *promClient) queryRange(ctx context.Context, expr string, tr timeRange) ([]promSeries, error) {
	var data struct {
		Result []promSeries `json:"result"`
	}
	q := url.Values{
		"query": {expr},
		"start": {strconv.FormatInt(tr.start.Unix(), 10)},
		"end":   {strconv.FormatInt(tr.end.Unix(), 10)},
		"step":  {strconv.FormatFloat(tr.step.Seconds(), 'f', -1, 64)},
	}
	if err := c.get(ctx, "/api/v1/query_range", q, &data); err != nil {
		return nil, err
	}
	return data.Result, nil
}

var labelValuesCall = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// labelValues evaluates a variable's label_values(selector, label) query as Grafana does.
func (c *promClient) labelValues(ctx context.Context, query string, tr timeRange) ([]string, error) {
	m := labelValuesCall.FindStringSubmatch(query)
	if m == nil {
		return nil, fmt.Errorf("variable query %q is not label_values(selector, label)", query)
	}
	var values []string
	q := url.Values{
		"match[]": {m[1]},
		"start":   {strconv.FormatInt(tr.start.Unix(), 10)},
		"end":     {strconv.FormatInt(tr.end.Unix(), 10)},
	}
	if err := c.get(ctx, "/api/v1/label/"+m[2]+"/values", q, &values); err != nil {
		return nil, err
	}
	return values, nil
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// legend formats a series' name from the target's legendFormat, as Grafana does.
func legend(format string, metric map[string]string) string {
	if format == "" {
		parts := make([]string, 0, len(metric))
		for k, v := range metric {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return legendLabel.ReplaceAllStringFunc(format, func(s string) string {
		return metric[legendLabel.FindStringSubmatch(s)[1]]
	})
}
