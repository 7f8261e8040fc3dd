package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"github.com/boardreadyops/cloud/schema"
)

// Lock is a table lock a migration statement takes, as read from its SQL (docs/upgrading.md).
type Lock struct {
	Table string `json:"table"`
	// Mode is PostgreSQL's lock mode: "ACCESS EXCLUSIVE" blocks reads and writes, "SHARE" and
	// "SHARE ROW EXCLUSIVE" block writes, "SHARE UPDATE EXCLUSIVE" blocks neither.
	Mode string `json:"mode"`
	// Scans: the statement reads (validates) or rewrites every row while it holds the lock, so
	// the lock is held for a time that grows with the table.
	Scans     bool   `json:"scans"`
	Statement string `json:"statement"`
}

// Planned is one pending migration: its Up SQL and the locks it takes.
type Planned struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
	SQL     string `json:"sql"`
	Locks   []Lock `json:"locks"`
	// Warnings name the large tables a scanning lock would hold (filled by Plan from the
	// database's sizes).
	Warnings []string `json:"warnings,omitempty"`
}

// LargeTableRows is the estimated row count from which a scanning lock is warned about.
const LargeTableRows = 100_000

// Plan lists the pending migrations up to version (0: all), with their SQL, their locks and,
// from the database's table sizes, a warning for each lock that scans a large table.
func (r *Runner) Plan(ctx context.Context, version int64) ([]Planned, error) {
	st, err := r.Status(ctx)
	if err != nil {
		return nil, err
	}
	var out []Planned
	for _, s := range st {
		if s.Applied || (version > 0 && s.Version > version) {
			continue
		}
		body, err := fs.ReadFile(schema.Migrations(), s.Name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", s.Name, err)
		}
		up := UpSQL(string(body))
		p := Planned{Version: s.Version, Name: s.Name, SQL: up, Locks: Locks(up)}
		for _, l := range p.Locks {
			if !l.Scans {
				continue
			}
			var rows float64
			var size string
			err := r.db.QueryRowContext(ctx, `SELECT coalesce(c.reltuples, 0)::float8, pg_size_pretty(pg_total_relation_size(c.oid))
				FROM pg_class c WHERE c.oid = to_regclass($1)`, l.Table).Scan(&rows, &size)
			if err != nil {
				continue // a table this migration creates
			}
			if rows >= LargeTableRows {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s: %s on %s (about %.0f rows, %s) while every row is read or rewritten",
					s.Name, l.Mode, l.Table, rows, size))
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// UpSQL is the Up section of a goose migration file.
func UpSQL(file string) string {
	up, _, _ := strings.Cut(file, "-- +goose Down")
	if _, rest, ok := strings.Cut(up, "-- +goose Up"); ok {
		up = rest
	}
	return strings.TrimSpace(up)
}

// lockRules map statement shapes to the lock they take on the table in group 1. Order matters:
// the first matching rule wins. Function bodies are removed before matching. A rule marked single
// applies only to an ALTER TABLE of one subcommand: several take the strongest of their locks.
var lockRules = []struct {
	re     *regexp.Regexp
	mode   string
	scans  bool
	single bool
}{
	{regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(?:ONLY\s+)?([\w.]+)`), "SHARE UPDATE EXCLUSIVE", true, false},
	{regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(?:ONLY\s+)?([\w.]+)`), "SHARE", true, false},
	{regexp.MustCompile(`(?is)^CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+\S+\s+.*?\s+ON\s+([\w.]+)`), "SHARE ROW EXCLUSIVE", false, false},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s+VALIDATE\s+CONSTRAINT`), "SHARE UPDATE EXCLUSIVE", true, false},
	// A foreign key alone: SHARE ROW EXCLUSIVE on the table and on the one it references.
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s+ADD\s+(?:CONSTRAINT\s+\S+\s+)?FOREIGN\s+KEY\b.*\bNOT\s+VALID\b`), "SHARE ROW EXCLUSIVE", false, true},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s+ADD\s+(?:CONSTRAINT\s+\S+\s+)?FOREIGN\s+KEY\b`), "SHARE ROW EXCLUSIVE", true, true},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s.*?\bADD\s+(?:CONSTRAINT\s+\S+\s+)?(?:CHECK|FOREIGN\s+KEY).*\bNOT\s+VALID\b`), "ACCESS EXCLUSIVE", false, false},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s.*?\bADD\s+(?:CONSTRAINT\s+\S+\s+)?(?:CHECK|FOREIGN\s+KEY|UNIQUE|PRIMARY\s+KEY)`), "ACCESS EXCLUSIVE", true, false},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s+.*\bALTER\s+COLUMN\s+\S+\s+(?:SET\s+DATA\s+)?TYPE\b`), "ACCESS EXCLUSIVE", true, false},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)\s+SET\s*\(`), "SHARE UPDATE EXCLUSIVE", false, false},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?([\w.]+)`), "ACCESS EXCLUSIVE", false, false},
	{regexp.MustCompile(`(?is)^DROP\s+INDEX\s+CONCURRENTLY`), "", false, false},
	{regexp.MustCompile(`(?is)^DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?([\w.]+)`), "ACCESS EXCLUSIVE (the index's table)", false, false},
	{regexp.MustCompile(`(?is)^(?:DROP|TRUNCATE)\s+TABLE\s+(?:IF\s+EXISTS\s+)?([\w.]+)`), "ACCESS EXCLUSIVE", false, false},
	{regexp.MustCompile(`(?is)^(?:UPDATE|DELETE\s+FROM)\s+(?:ONLY\s+)?([\w.]+)`), "ROW EXCLUSIVE", true, false},
}

var (
	// subcommands finds a second subcommand of an ALTER TABLE.
	subcommands = regexp.MustCompile(`(?is),\s*(?:ADD|DROP|ALTER|VALIDATE|SET|RESET|ENABLE|DISABLE|OWNER|RENAME|INHERIT|NO\s+INHERIT|CLUSTER|REPLICA)\b`)
	references  = regexp.MustCompile(`(?is)\bREFERENCES\s+(?:ONLY\s+)?([\w.]+)`)
	alterTable  = regexp.MustCompile(`(?is)^ALTER\s+TABLE\b`)
)

var dollarBody = regexp.MustCompile(`(?s)\$([A-Za-z_]*)\$.*?\$([A-Za-z_]*)\$`)

// Locks reads the table locks of a migration's SQL, statement by statement: the locks PostgreSQL
// takes for these statement shapes (DDL lock levels of the ALTER TABLE, CREATE INDEX, CREATE
// TRIGGER and DROP reference pages). Creating a table, function, role or grant locks no existing
// table and is not listed.
func Locks(sql string) []Lock {
	var out []Lock
	for _, stmt := range statements(sql) {
		for _, rule := range lockRules {
			m := rule.re.FindStringSubmatch(stmt)
			if m == nil || rule.single && subcommands.MatchString(stmt) {
				continue
			}
			if rule.mode != "" && len(m) > 1 {
				out = append(out, Lock{Table: strings.TrimPrefix(m[1], "public."), Mode: rule.mode, Scans: rule.scans, Statement: firstLine(stmt)})
				// A statement that names a foreign key's table (REFERENCES) locks that table as
				// strongly: the key's triggers are there. A key dropped by name alone is not seen.
				if r := references.FindStringSubmatch(stmt); r != nil && alterTable.MatchString(stmt) {
					out = append(out, Lock{Table: strings.TrimPrefix(r[1], "public."), Mode: rule.mode, Statement: firstLine(stmt)})
				}
			}
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// statements splits sql at semicolons outside dollar-quoted bodies, with comments removed.
func statements(sql string) []string {
	sql = dollarBody.ReplaceAllString(sql, "$$$$")
	var lines []string
	for _, l := range strings.Split(sql, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	var out []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
