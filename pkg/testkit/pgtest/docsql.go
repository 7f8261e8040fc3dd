package pgtest

import (
	"fmt"
	"strings"
)

// DocSQL returns the statements of the first sql code block after the line heading (e.g.
// "## Before installing") in the Markdown document doc, one per semicolon, comments dropped and
// lines joined: the documented setup a test runs as written.
func DocSQL(doc []byte, heading string) ([]string, error) {
	_, after, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		return nil, fmt.Errorf("no %q section", heading)
	}
	_, block, ok := strings.Cut(after, "```sql\n")
	if !ok {
		return nil, fmt.Errorf("no sql block under %q", heading)
	}
	block, _, _ = strings.Cut(block, "```")
	var stmts []string
	for _, s := range strings.Split(block, ";") {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			stmts = append(stmts, strings.Join(lines, " "))
		}
	}
	return stmts, nil
}
