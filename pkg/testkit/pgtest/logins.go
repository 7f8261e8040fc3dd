package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NewLogin creates a login user that is a member of groupRoles (a service's group role, e.g.
// boardreadyops_dispatcher; none for a login that has only what PUBLIC has), exactly as docs/operations.md tells a deployment to, and returns
// dbURL changed to connect as that user. Its session_user is the login, not the harness's
// superuser: what it may do is what a deployed service may do. The user is dropped when the test
// ends.
func NewLogin(tb testing.TB, dbURL string, groupRoles ...string) string {
	tb.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	name := "brtest_login_" + hex.EncodeToString(b[:])
	password := hex.EncodeToString(b[:]) + "-pw" // generated per test; trust auth ignores it
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stmt := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", pgx.Identifier{name}.Sanitize(), password)
	for i, r := range groupRoles {
		if i == 0 {
			stmt += " IN ROLE "
		} else {
			stmt += ", "
		}
		stmt += pgx.Identifier{r}.Sanitize()
	}
	if err := exec(ctx, dbURL, stmt); err != nil {
		tb.Fatalf("pgtest: create login: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The login's sessions end with the test's pools (cleanups run in reverse order); objects
		// it created in the test database go with the database.
		_ = exec(ctx, dbURL, "DROP OWNED BY "+pgx.Identifier{name}.Sanitize())
		if err := exec(ctx, dbURL, "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			tb.Errorf("pgtest: drop login %s: %v", name, err)
		}
	})
	return asUser(tb, dbURL, name, password)
}

// NewLoginPool is NewLogin with a pool connected as the new login.
func NewLoginPool(tb testing.TB, dbURL string, groupRoles ...string) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), NewLogin(tb, dbURL, groupRoles...))
	if err != nil {
		tb.Fatalf("pgtest: connect as login: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func exec(ctx context.Context, dbURL, sql string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// asUser returns dbURL with its user and password replaced.
func asUser(tb testing.TB, dbURL, user, password string) string {
	tb.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		// A keyword/value connection string: later keywords override earlier ones.
		return strings.TrimSpace(dbURL) + fmt.Sprintf(" user=%s password=%s", user, password)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}
