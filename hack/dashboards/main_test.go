package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The chart's dashboards are what the generator writes now (make generate), file for file.
func TestChartHoldsTheGeneratedDashboards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	generated, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	committed, _ := filepath.Glob("../../charts/boardreadyops/dashboards/*.json")
	if len(generated) != len(committed) {
		t.Fatalf("the generator writes %d dashboards, the chart holds %d: run make generate", len(generated), len(committed))
	}
	for _, g := range generated {
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("../../charts/boardreadyops/dashboards", filepath.Base(g)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("charts/boardreadyops/dashboards/%s is not what hack/dashboards generates: run make generate (%v)", filepath.Base(g), err)
		}
	}
}
