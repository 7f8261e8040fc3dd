package pgcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

const childEnv = "PGCLUSTER_TEST_CHILD"

// TestMain doubles as the child process of TestServerDiesWithItsParent.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("port=%d dir=%s\n", c.Port(), c.Dir())
		time.Sleep(time.Minute) // killed by the parent long before this
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestStartQueryStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Fatalf("fsync %q %v, want off for a test cluster", fsync, err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary cluster directory left behind: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

func TestDurableClusterKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// t.TempDir's parent is private (0700); a root test hands the cluster to an unprivileged user,
	// which must be able to reach the directory.
	dir, err := os.MkdirTemp("", "pgcluster-durable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	for i, stmt := range []string{"CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)", "SELECT x FROM kept"} {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Durable: true})
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			_, err = conn.Exec(ctx, stmt)
		} else {
			var x int
			err = conn.QueryRow(ctx, stmt).Scan(&x)
			if x != 42 {
				t.Errorf("read back %d", x)
			}
		}
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// A test process that dies without cleanup (panic, SIGKILL, timeout) must not leave a server.
func TestServerDiesWithItsParent(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "port=") {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %q %v", line, err)
	}
	fields := strings.Fields(line)
	port, _ := strconv.Atoi(strings.TrimPrefix(fields[0], "port="))
	dir := strings.TrimPrefix(fields[1], "dir=")
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if conn, err := net.Dial("tcp", addr); err != nil {
		t.Fatalf("server not listening: %v", err)
	} else {
		conn.Close()
	}

	_ = cmd.Process.Kill() // SIGKILL: no deferred cleanup runs in the child
	_ = cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return // the server is gone
		}
		conn.Close()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("postgres still accepting connections 15s after its parent was killed")
}

// Interrupt and Resume, fast and immediate, keep every committed row and the port.
func TestInterruptResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	exec := func(q string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE kept (x int)")
	for _, immediate := range []bool{false, true} {
		exec("INSERT INTO kept VALUES (1)")
		c.Interrupt(immediate)
		if conn, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
			conn.Close(ctx)
			t.Fatalf("connected while interrupted (immediate %v)", immediate)
		}
		if err := c.Resume(ctx); err != nil {
			t.Fatalf("resume (immediate %v): %v", immediate, err)
		}
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after two restarts = %d, %v; want 2", n, err)
	}
}

// A transaction-pooling PgBouncer pools the cluster's databases; statements that name no
// prepared statement work through it, and its version is known.
func TestBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	b, err := c.StartBouncer(ctx, pgcluster.BouncerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	conn, err := pgx.Connect(ctx, b.URL("postgres")+"&default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var port int
	if err := conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil || port != c.Port() {
		t.Fatalf("through the pooler: server port %d, %v; want %d", port, err, c.Port())
	}
	if v, err := pgcluster.BouncerVersion(); err != nil || v == "" {
		t.Fatalf("version %q, %v", v, err)
	}
}

// A synchronous standby has every committed row when its primary is killed, and takes writes
// once promoted.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := pgcluster.Start(ctx, pgcluster.Options{Durable: true, Settings: []string{"synchronous_standby_names=standby1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	s, err := p.StartStandby(ctx, "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if err := p.WaitStreaming(ctx, "standby1", true); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if err := s.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	var n int
	if err := sc.QueryRow(ctx, "INSERT INTO kept VALUES (2) RETURNING (SELECT count(*) FROM kept)").Scan(&n); err != nil || n != 1 {
		t.Fatalf("on the promoted standby: %d rows before the insert, %v; want 1", n, err)
	}
}
