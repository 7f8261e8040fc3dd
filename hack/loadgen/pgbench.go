package main

import (
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

var tpsPattern = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench initialises (scale 10) and runs `pgbench -N -c 8 -j 2` for d against databaseURL and
// returns its TPS: the reference every figure of docs/performance.md is divided by.
func pgbench(databaseURL string, d time.Duration) (float64, error) {
	bin := "pgbench"
	if dir, err := pgcluster.FindBinDir(); err == nil {
		bin = filepath.Join(dir, "pgbench")
	}
	if out, err := exec.Command(bin, "-i", "-q", "-s", "10", databaseURL).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	out, err := exec.Command(bin, "-N", "-c", "8", "-j", "2", "-T", strconv.Itoa(int(d.Seconds())), databaseURL).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench -N: %w\n%s", err, out)
	}
	m := tpsPattern.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench: no tps in output:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func runPgbench(args []string) error {
	fs := flag.NewFlagSet("pgbench", flag.ContinueOnError)
	dbURL := fs.String("database-url", "", "database to run pgbench on (its tables are created there)")
	d := fs.Duration("duration", 30*time.Second, "run length")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tps, err := pgbench(*dbURL, *d)
	if err != nil {
		return err
	}
	fmt.Printf("pgbench -N -c 8 -j 2: %.0f tps\n", tps)
	return nil
}
