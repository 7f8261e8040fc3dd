// Command dashboards writes the chart's Grafana dashboards (charts/boardreadyops/dashboards/*.json)
// from their Go definitions with Grafana's Foundation SDK. `make generate` runs it; the JSON is a
// generated file that `make verify-generate` checks, and hack/test/docscheck lints it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "charts/boardreadyops/dashboards", "directory to write the dashboards to")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

// write builds every dashboard and writes each to dir as <uid>.json.
func write(dir string) error {
	for _, b := range boards() {
		d, err := b.build()
		if err != nil {
			return fmt.Errorf("build %s: %w", b.uid, err)
		}
		raw, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return fmt.Errorf("encode %s: %w", b.uid, err)
		}
		if err := os.WriteFile(filepath.Join(dir, b.uid+".json"), append(raw, '\n'), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", b.uid, err)
		}
	}
	return nil
}
