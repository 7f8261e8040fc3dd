package pgtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Plans is a connection whose statements' plans — nested ones (inside functions) and generic
// plans included — are captured through auto_explain.
type Plans struct {
	Conn  *pgx.Conn
	mu    sync.Mutex
	plans []string
}

// NewPlans connects to dbURL with auto_explain reporting every plan as a NOTICE and PL/pgSQL
// forced onto generic plans (what it settles on after five calls). The test is skipped when the
// user may not load auto_explain (a TEST_DATABASE_URL user that is not a superuser).
func NewPlans(tb testing.TB, dbURL string) *Plans {
	tb.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Plans{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.plans = append(p.plans, n.Message)
	}
	if p.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Conn.Close(context.Background()) })
	if _, err := p.Conn.Exec(ctx, `LOAD 'auto_explain'`); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			tb.Skipf("auto_explain needs a superuser (the TEST_DATABASE_URL user is not): %v", err)
		}
		tb.Fatal(err)
	}
	for _, s := range []string{`SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_nested_statements = on`,
		`SET auto_explain.log_level = notice`, `SET plan_cache_mode = force_generic_plan`} {
		if _, err := p.Conn.Exec(ctx, s); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// Find returns the last captured plan containing node (e.g. "Update on control_plane_jobs"), or
// "" with every plan seen, for the failure message.
func (p *Plans) Find(node string) (string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	found := ""
	for _, plan := range p.plans {
		if strings.Contains(plan, node) {
			found = plan
		}
	}
	return found, append([]string(nil), p.plans...)
}
