package docscheck_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// anchor turns a Markdown heading into GitHub's anchor.
func anchor(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile(`[^a-z0-9 -]`).ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

func TestEveryRunbookLinkResolves(t *testing.T) {
	t.Parallel()
	rules, ops := rulesAndRunbooks(t)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(ops), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[anchor(h)] = true
		}
	}
	links := regexp.MustCompile(`runbook_url: \S*docs/operations\.md#(\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(links) == 0 {
		t.Fatal("no runbook links found in the rules")
	}
	for _, l := range links {
		if !anchors[l[1]] {
			t.Errorf("runbook link #%s has no section in docs/operations.md", l[1])
		}
	}
	if n := strings.Count(string(rules), "- alert: "); n != len(links) {
		t.Errorf("%d alerts but %d runbook links: every alert needs one", n, len(links))
	}
}

// Every alert is named in the runbook section it links to, so that the page an on-call engineer
// opens says what fired and what to do about it (a section written for one alert, linked from
// another, once left lifecycle's and ingest's alerts without a step of their own).
func TestEveryAlertIsNamedInItsRunbook(t *testing.T) {
	t.Parallel()
	rules, ops := rulesAndRunbooks(t)
	sections := map[string]string{}
	var current string
	for _, line := range strings.Split(string(ops), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			current = anchor(h)
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	alerts := regexp.MustCompile(`(?s)- alert: (\S+)\n.*?runbook_url: \S*docs/operations\.md#(\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 {
		t.Fatal("no alerts found in the rules")
	}
	for _, a := range alerts {
		if !strings.Contains(sections[a[2]], a[1]) {
			t.Errorf("%s links #%s, which does not name it", a[1], a[2])
		}
	}
}

// rulesAndRunbooks reads the alert rules and docs/operations.md, where their runbooks are.
func rulesAndRunbooks(t *testing.T) (rules, ops []byte) {
	t.Helper()
	rules, err := os.ReadFile("../../../charts/boardreadyops/rules/boardreadyops.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	ops, err = os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return rules, ops
}
