package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
	db := pgtest.NewDocDatabase(t, chartBootstrapSQL(t))
	for _, want := range []string{"br_migrate", "br_ingest", "br_lifecycle", "br_dispatcher"} {
		if !slices.Contains(db.Logins, db.Login(want)) {
			t.Fatalf("the chart README's block creates no %s", want)
		}
	}
	r, err := migrate.Open(db.URL(t, "br_migrate"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Up(ctx); err != nil {
		t.Fatalf("migrate as the chart README's migration user: %v", err)
	}
	releasesEndToEnd(t, db.URL(t, ""), map[string]string{
		"ingest":            db.URL(t, "br_ingest"),
		"lifecycle":         db.URL(t, "br_lifecycle"),
		"outbox-dispatcher": db.URL(t, "br_dispatcher"),
	})
}
