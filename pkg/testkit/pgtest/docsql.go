package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// DocDatabase is a database set up by a documented SQL block (see NewDocDatabase).
type DocDatabase struct {
	Suffix   string   // appended to every br_* login of the block, and to the database's name
	Logins   []string // the logins the block created, renamed
	password string
	adminURL string
	name     string
}

// NewDocDatabase runs stmts (a documented setup block, e.g. from DocSQL) as a superuser on a
// fresh server database, as written except that every login br_x becomes br_x_<suffix>, every
// PASSWORD '…' a generated one, and CREATE DATABASE boardreadyops a database of this test (the
// server's roles are shared by its tests; a group role they already created is skipped). The
// database and the logins are dropped when the test ends.
func NewDocDatabase(tb testing.TB, stmts []string) *DocDatabase {
	tb.Helper()
	ctx := context.Background()
	adminURL := NewEmptyURL(tb)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	d := &DocDatabase{Suffix: hex.EncodeToString(b[:]), adminURL: adminURL}
	d.name = "brdoc_" + d.Suffix
	d.password = "generated-" + d.Suffix
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close(ctx)
	tb.Cleanup(func() {
		ctx := context.Background()
		if err := exec(ctx, adminURL, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database: %v", err)
		}
		for _, l := range d.Logins {
			if err := exec(ctx, adminURL, "DROP ROLE IF EXISTS "+l); err != nil {
				tb.Errorf("pgtest: drop %s: %v", l, err)
			}
		}
	})
	login := regexp.MustCompile(`\bbr_([a-z]+)\b`)
	for _, stmt := range stmts {
		stmt = login.ReplaceAllStringFunc(stmt, func(s string) string {
			d.Logins = append(d.Logins, s+"_"+d.Suffix)
			return s + "_" + d.Suffix
		})
		stmt = strings.ReplaceAll(stmt, "PASSWORD '…'", "PASSWORD '"+d.password+"'")
		stmt = strings.Replace(stmt, "CREATE DATABASE boardreadyops ", "CREATE DATABASE "+d.name+" ", 1)
		_, err := admin.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" && strings.HasPrefix(stmt, "CREATE ROLE boardreadyops_") {
			continue // a group role this server's template database or other tests created
		}
		if err != nil {
			tb.Fatalf("pgtest: %s: %v", strings.SplitN(stmt, " PASSWORD", 2)[0], err)
		}
	}
	return d
}

// Login is the renamed login of the block's br_x.
func (d *DocDatabase) Login(name string) string { return name + "_" + d.Suffix }

// URL connects to the database as the block's login (br_x, before renaming), or as the
// superuser when login is empty.
func (d *DocDatabase) URL(tb testing.TB, login string) string {
	tb.Helper()
	u, err := url.Parse(d.adminURL)
	if err != nil {
		tb.Fatal(err)
	}
	if login != "" {
		u.User = url.UserPassword(d.Login(login), d.password)
	}
	u.Path = "/" + d.name
	return u.String()
}
