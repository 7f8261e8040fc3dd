// Command vulncheck reads govulncheck's JSON stream (govulncheck -format json) and fails on every
// vulnerability whose code ours reaches (a finding whose trace names a function), unless the
// accepted file lists it with a reason and a date it expires on. Findings only at the module or
// package level (code present, not called) are not failures, as in govulncheck's own text mode.
//
//	govulncheck -format json ./... | go run ./hack/vulncheck -accepted hack/vulncheck/accepted.txt
//
// The accepted file has one line per vulnerability: ID, expiry date (YYYY-MM-DD) and reason, e.g.
// "GO-2026-6599 2027-01-15 standard library of go1.26.8, fixed in go1.27.2". An entry past its
// date fails like an unlisted finding, so an acceptance is never forgotten. docs/security.md,
// "Handling a vulnerability report", says when an entry may be added.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func main() {
	accepted := flag.String("accepted", "", "file of accepted vulnerabilities (ID, expiry date, reason)")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *accepted, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

// acceptance is one line of the accepted file.
type acceptance struct {
	expires time.Time
	reason  string
}

// errFindings reports reachable vulnerabilities that are not accepted.
var errFindings = errors.New("reachable vulnerabilities")

func run(in io.Reader, out io.Writer, acceptedPath string, now time.Time) error {
	acc := map[string]acceptance{}
	if acceptedPath != "" {
		var err error
		if acc, err = readAccepted(acceptedPath); err != nil {
			return err
		}
	}
	reached, err := reachable(in)
	if err != nil {
		return err
	}
	var failed []string
	for _, id := range reached.ids() {
		a, ok := acc[id]
		switch {
		case !ok:
			fmt.Fprintf(out, "vulnerable: %s (%s) is reached by our code; docs/security.md says how to handle it\n", id, reached[id])
			failed = append(failed, id)
		case now.After(a.expires):
			fmt.Fprintf(out, "vulnerable: %s (%s) was accepted until %s, which has passed: %s\n", id, reached[id], a.expires.Format(time.DateOnly), a.reason)
			failed = append(failed, id)
		default:
			fmt.Fprintf(out, "accepted until %s: %s (%s): %s\n", a.expires.Format(time.DateOnly), id, reached[id], a.reason)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errFindings, strings.Join(failed, ", "))
	}
	return nil
}

// findings maps a vulnerability id to where it is reached (module@version).
type findings map[string]string

func (f findings) ids() []string {
	ids := make([]string, 0, len(f))
	for id := range f {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// message is the part of govulncheck's JSON messages read here.
type message struct {
	Finding *struct {
		OSV   string `json:"osv"`
		Trace []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Function string `json:"function"`
		} `json:"trace"`
	} `json:"finding"`
}

func reachable(in io.Reader) (findings, error) {
	f := findings{}
	dec := json.NewDecoder(in)
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read govulncheck output: %w", err)
		}
		if m.Finding == nil || len(m.Finding.Trace) == 0 || m.Finding.Trace[0].Function == "" {
			continue
		}
		t := m.Finding.Trace[0]
		f[m.Finding.OSV] = t.Module + "@" + t.Version
	}
}

func readAccepted(path string) (map[string]acceptance, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("accepted vulnerabilities: %w", err)
	}
	defer file.Close()
	acc := map[string]acceptance{}
	sc := bufio.NewScanner(file)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, " ", 3)
		if len(fields) < 3 || strings.TrimSpace(fields[2]) == "" {
			return nil, fmt.Errorf("%s:%d: want ID, expiry date and reason", path, n)
		}
		expires, err := time.Parse(time.DateOnly, fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: expiry date: %w", path, n, err)
		}
		// Accepted through the whole day named.
		acc[fields[0]] = acceptance{expires: expires.Add(24*time.Hour - time.Nanosecond), reason: strings.TrimSpace(fields[2])}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("accepted vulnerabilities: %w", err)
	}
	return acc, nil
}
