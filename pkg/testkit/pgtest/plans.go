package pgtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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
	cfg.OnNotice = p.collect
	if p.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Conn.Close(context.Background()) })
	if err := explain(ctx, p.Conn); err != nil {
		skipOrFatal(tb, err)
	}
	if _, err := p.Conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		tb.Fatal(err)
	}
	return p
}

// NewPlansPool is NewPlans for a pool of at most maxConns connections, each reporting its plans,
// with PostgreSQL's own choice between custom and generic plans (for code that caches them, as
// the services' pools do).
func NewPlansPool(tb testing.TB, dbURL string, maxConns int32) (*pgxpool.Pool, *Plans) {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Plans{}
	cfg.ConnConfig.OnNotice = p.collect
	cfg.AfterConnect = explain
	cfg.MaxConns = maxConns
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	// A first connection here, on the test's goroutine: skip now rather than fail later.
	if err := pool.Ping(ctx); err != nil {
		skipOrFatal(tb, err)
	}
	return pool, p
}

func (p *Plans) collect(_ *pgconn.PgConn, n *pgconn.Notice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans = append(p.plans, n.Message)
}

// explain loads auto_explain on c, reporting every plan (nested ones included) as a NOTICE.
func explain(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, `LOAD 'auto_explain'`); err != nil {
		return err
	}
	for _, s := range []string{`SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_nested_statements = on`,
		`SET auto_explain.log_level = notice`} {
		if _, err := c.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// skipOrFatal skips the test when the user may not load auto_explain (a TEST_DATABASE_URL user
// that is not a superuser), and fails it on any other error.
func skipOrFatal(tb testing.TB, err error) {
	tb.Helper()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		tb.Skipf("auto_explain needs a superuser (the TEST_DATABASE_URL user is not): %v", err)
	}
	tb.Fatal(err)
}

// Reset forgets the plans captured so far.
func (p *Plans) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans = nil
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
