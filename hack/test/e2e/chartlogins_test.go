package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/migrate"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
)

// chartBootstrapSQL returns the statements of the first sql block under "## Before installing"
// in the chart README: what an operator runs before helm install.
func chartBootstrapSQL(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "boardreadyops", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := pgtest.DocSQL(doc, "## Before installing")
	if err != nil {
		t.Fatalf("chart README: %v", err)
	}
	return stmts
}

// TestReleasesEndToEndAsChartLogins is the release loop on a database prepared exactly as the
// chart README says: its SQL block run as written (logins and database renamed for this test),
// the migration run as its migration user, and each service connected as its own login, none a
// superuser, none a member of the clock role. A privilege a service needs and its group role
// lacks, or a README block that no longer matches the migrations, fails here rather than on a
// cluster.
func TestReleasesEndToEndAsChartLogins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	adminURL := pgtest.NewEmptyURL(t) // a superuser connection to run the README's block from
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b[:])
	database := "brchart_" + suffix
	password := "generated-" + suffix
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	login := regexp.MustCompile(`\bbr_([a-z]+)\b`)
	var logins []string
	for _, stmt := range chartBootstrapSQL(t) {
		stmt = login.ReplaceAllStringFunc(stmt, func(s string) string {
			logins = append(logins, s+"_"+suffix)
			return s + "_" + suffix
		})
		stmt = strings.ReplaceAll(stmt, "PASSWORD '…'", "PASSWORD '"+password+"'")
		stmt = strings.Replace(stmt, "CREATE DATABASE boardreadyops ", "CREATE DATABASE "+database+" ", 1)
		_, err := admin.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" && strings.HasPrefix(stmt, "CREATE ROLE boardreadyops_") {
			continue // a group role this server's template database already created
		}
		if err != nil {
			t.Fatalf("chart README: %s: %v", strings.SplitN(stmt, " PASSWORD", 2)[0], err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+database+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
		for _, l := range logins {
			if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+l); err != nil {
				t.Errorf("drop %s: %v", l, err)
			}
		}
	})
	urlFor := func(user string) string {
		u, err := url.Parse(adminURL)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			u.User = url.UserPassword(user+"_"+suffix, password)
		}
		u.Path = "/" + database
		return u.String()
	}
	for _, want := range []string{"br_migrate", "br_ingest", "br_lifecycle", "br_dispatcher"} {
		if !strings.Contains(strings.Join(logins, " "), want+"_"+suffix) {
			t.Fatalf("the chart README's block creates no %s", want)
		}
	}

	r, err := migrate.Open(urlFor("br_migrate"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Up(ctx); err != nil {
		t.Fatalf("migrate as the chart README's migration user: %v", err)
	}
	r.Close()

	releasesEndToEnd(t, urlFor(""), map[string]string{
		"ingest":            urlFor("br_ingest"),
		"lifecycle":         urlFor("br_lifecycle"),
		"outbox-dispatcher": urlFor("br_dispatcher"),
	})
}
