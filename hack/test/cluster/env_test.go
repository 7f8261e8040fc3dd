//go:build cluster

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/boardreadyops/cloud/hack/cluster/node"
	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
	"github.com/boardreadyops/cloud/pkg/testkit/pgtest"
	"github.com/boardreadyops/cloud/schema"
)

// repo is the repository root, from this package's directory.
var repo = func() string {
	d, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		panic(err)
	}
	return d
}()

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// hostSnapshot is what the leak check compares before the cluster and after its teardown.
type hostSnapshot struct {
	interfaces, mounts, chains []string
}

func snapshotHost(t *testing.T) hostSnapshot {
	t.Helper()
	var s hostSnapshot
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		s.interfaces = append(s.interfaces, e.Name())
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			s.mounts = append(s.mounts, f[4])
		}
	}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			continue
		}
		table := ""
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, "-A "):
				s.chains = append(s.chains, cmd+" "+table+" "+line)
			case strings.HasPrefix(line, ":") && strings.Contains(line, " - "):
				s.chains = append(s.chains, cmd+" "+table+" chain "+strings.Fields(line[1:])[0])
			}
		}
	}
	sort.Strings(s.interfaces)
	sort.Strings(s.mounts)
	sort.Strings(s.chains)
	return s
}

// diff lists the entries of after that before lacks.
func diff(before, after []string) []string {
	seen := map[string]int{}
	for _, b := range before {
		seen[b]++
	}
	var out []string
	for _, a := range after {
		if seen[a] > 0 {
			seen[a]--
			continue
		}
		out = append(out, a)
	}
	return out
}

// postgres is the product's database: a private PostgreSQL server on the host, listening on
// loopback (the test's superuser, by trust) and on the bridge address (the pods' login users, by
// password). It runs outside the cluster because no PostgreSQL image is reachable here and the
// chart does not install one; pods reach it at the bridge address like any external database.
type postgres struct {
	cluster  *pgcluster.Cluster
	host     string
	admin    *pgxpool.Pool // superuser on loopback, database boardreadyops
	password map[string]string
}

func startPostgres(t *testing.T, ctx context.Context, bridge string) *postgres {
	t.Helper()
	// Readable by the server's user (pgcluster runs it unprivileged): t.TempDir's parent is not.
	conf, err := os.MkdirTemp("", "cluster-pg-conf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(conf) })
	if err := os.Chmod(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(conf, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte("local all all trust\nhost all all 127.0.0.1/32 trust\n"+
		"host boardreadyops all "+bridge+"/24 scram-sha-256\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 200,
		Settings: []string{"listen_addresses=127.0.0.1," + bridge, "hba_file=" + hba, "password_encryption=scram-sha-256"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	p := &postgres{cluster: c, host: bridge, password: map[string]string{}}
	// The chart README's block, as written, with a generated password for each login.
	super, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(ctx)
	doc, err := os.ReadFile(filepath.Join(repo, "charts", "boardreadyops", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := pgtest.DocSQL(doc, "## Before installing")
	if err != nil {
		t.Fatalf("chart README: %v", err)
	}
	login := regexp.MustCompile(`^CREATE ROLE (br_[a-z]+) LOGIN PASSWORD '…'`)
	for _, s := range stmts {
		if m := login.FindStringSubmatch(s); m != nil {
			p.password[m[1]] = randomHex(16)
			s = strings.Replace(s, "'…'", "'"+p.password[m[1]]+"'", 1)
		}
		if _, err := super.Exec(ctx, s); err != nil {
			t.Fatalf("chart README: %s: %v", strings.SplitN(s, " PASSWORD", 2)[0], err)
		}
	}
	for _, u := range []string{"br_migrate", "br_ingest", "br_lifecycle", "br_dispatcher", "br_redeliver"} {
		if p.password[u] == "" {
			t.Fatalf("the chart README's block creates no login %s", u)
		}
	}
	if p.admin, err = pgxpool.New(ctx, c.URL("boardreadyops")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.admin.Close)
	return p
}

// url is the URL a pod connects with as login user.
func (p *postgres) url(user string) string {
	return fmt.Sprintf("postgres://%s:%s@%s/boardreadyops?sslmode=disable", user, p.password[user],
		net.JoinHostPort(p.host, fmt.Sprint(p.cluster.Port())))
}

func (p *postgres) count(t *testing.T, ctx context.Context, q string, args ...any) int {
	t.Helper()
	var n int
	if err := p.admin.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// lateHandler serves with the handler set later (the simulator needs ingest's Service address,
// which exists only after the install that needs the simulator's URL).
type lateHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.Error(w, "simulator not started", http.StatusServiceUnavailable)
}

// upgradeRepository is a copy of the modules the images are built from, plus one test-only
// migration after the newest in schema/migrations: the image tag the upgrade rolls to.
func upgradeRepository(t *testing.T) (dir string, version int64) {
	t.Helper()
	dir = t.TempDir()
	for _, m := range []string{"go.work", "schema", "pkg", "services"} {
		if out, err := exec.Command("cp", "-a", filepath.Join(repo, m), dir).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v: %s", m, err, out)
		}
	}
	version = schema.ExpectedVersion() + 1
	sql, err := os.ReadFile(filepath.Join("testdata", "upgrade_migration.sql"))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%05d_cluster_test_upgrade.sql", version)
	if err := os.WriteFile(filepath.Join(dir, "schema", "migrations", name), sql, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, version
}

// buildImages builds and pushes the product's images from root with tag.
func buildImages(t *testing.T, ctx context.Context, root, registry, tag, revision string, names string) {
	t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/images", "-repository", root, "-base", "local",
		"-push", registry+"/boardreadyops", "-tag", tag, "-revision", revision, "-images", names)
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("images %s: %v\n%s", tag, err, out)
	}
	t.Logf("images %s built and pushed in %s:\n%s", tag, time.Since(start).Round(time.Second), out)
}

func clusterConfig(t *testing.T) node.Config {
	t.Helper()
	c := node.Config{Dir: filepath.Join(repo, ".data", "cluster-test"), Logf: t.Logf, PauseImage: "127.0.0.1:5001/boardreadyops/pause:v1"}
	c.Defaults()
	return c
}
