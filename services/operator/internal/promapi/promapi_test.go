package promapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    float64
		wantErr string
	}{
		{"vector", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.1,"0.312"]}]}}`, 0.312, ""},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"42"]}}`, 42, ""},
		{"empty vector", `{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, ErrNoData.Error()},
		{"NaN", `{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"NaN"]}]}}`, 0, ErrNoData.Error()},
		{"error", `{"status":"error","errorType":"bad_data","error":"parse error"}`, 0, "bad_data: parse error"},
		{"not JSON", `<html>`, 0, "not an API response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gotQuery string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = r.ParseForm()
				gotQuery = r.Form.Get("query")
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			v, err := Query(context.Background(), srv.Client(), srv.URL+"/", "up", time.Unix(1700000000, 0))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.wantErr == ErrNoData.Error() && !errors.Is(err, ErrNoData) {
					t.Fatalf("err = %v, want ErrNoData", err)
				}
				return
			}
			if err != nil || v != tt.want || gotQuery != "up" {
				t.Fatalf("Query = %v, %v (query %q); want %v", v, err, gotQuery, tt.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	e := Build(`namespace="b"`, 0.99, 2*time.Minute)
	for _, want := range []string{
		`histogram_quantile(0.99, sum by (le) (rate(boardreadyops_outbox_claim_duration_seconds_bucket{namespace="b"}[2m])))`,
	} {
		if e.ClaimLatency != want {
			t.Errorf("claim latency query %q, want %q", e.ClaimLatency, want)
		}
	}
	if e.Throughput != `sum(rate(boardreadyops_outbox_effects_processed_total{outcome="completed",namespace="b"}[2m]))` {
		t.Errorf("throughput query %q", e.Throughput)
	}
	if got := Build("x", 0.5, 90*time.Second).OldestAge; got != `max(boardreadyops_outbox_oldest_available_effect_age_seconds{x})` {
		t.Errorf("age query %q", got)
	}
}
