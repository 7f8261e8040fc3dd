package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
)

// BouncerOptions configure a private PgBouncer in front of a cluster.
type BouncerOptions struct {
	// PoolMode is session, transaction or statement; empty means transaction, the mode that
	// breaks session state (named prepared statements, LISTEN, advisory locks, SET).
	PoolMode string
	// DefaultPoolSize is the number of server connections per (database, user); 0 means 20.
	DefaultPoolSize int
	// Users may connect (auth_type trust, loopback only); empty means the cluster's Superuser.
	Users []string
	// Settings are extra "name = value" lines of the [pgbouncer] section.
	Settings []string
}

// Bouncer is a running PgBouncer process that pools connections to one cluster.
type Bouncer struct {
	dir     string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// FindBouncer locates the pgbouncer binary (Debian: apt-get install pgbouncer, which installs it
// in /usr/sbin, often not on a non-root PATH).
func FindBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer not found on PATH or in /usr/sbin: install it (Debian: apt-get install pgbouncer)")
}

// BouncerVersion is pgbouncer's version ("1.18.0").
func BouncerVersion() (string, error) {
	bin, err := FindBouncer()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pgbouncer --version: %w", err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(strings.TrimSpace(first), "PgBouncer "), nil
}

// StartBouncer starts PgBouncer on a free loopback port, pooling every database of c (a wildcard
// database entry), and waits until it accepts connections. Like the cluster it dies with the
// calling process. Stop it with Stop.
func (c *Cluster) StartBouncer(ctx context.Context, opts BouncerOptions) (*Bouncer, error) {
	bin, err := FindBouncer()
	if err != nil {
		return nil, err
	}
	b := &Bouncer{exited: make(chan struct{})}
	if b.dir, err = os.MkdirTemp("", "boardreadyops-pgbouncer-"); err != nil {
		return nil, fmt.Errorf("create pgbouncer directory: %w", err)
	}
	if b.port, err = freeport.Port(); err != nil {
		_ = os.RemoveAll(b.dir)
		return nil, err
	}
	users := opts.Users
	if len(users) == 0 {
		users = []string{Superuser}
	}
	var userlist strings.Builder
	for _, u := range users {
		fmt.Fprintf(&userlist, "%q \"\"\n", u)
	}
	ini := bouncerINI(c.port, b.port, b.dir, opts)
	fail := func(err error) (*Bouncer, error) { _ = os.RemoveAll(b.dir); return nil, err }
	if err := os.WriteFile(filepath.Join(b.dir, "userlist.txt"), []byte(userlist.String()), 0o644); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		return fail(err)
	}
	cred, err := serverCredential()
	if err != nil {
		return fail(err)
	}
	if err := chownForServer(b.dir, cred); err != nil {
		return fail(err)
	}
	args := []string{filepath.Join(b.dir, "pgbouncer.ini")}
	if cred != nil {
		// PgBouncer refuses to run as root; it drops to the server's unprivileged user itself.
		args = append([]string{"-u", "nobody"}, args...)
	}
	started := make(chan error, 1)
	go func() {
		// As for the server: the parent-death signal follows the forking thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(bin, args...)
		cmd.Env = serverEnv()
		cmd.Dir = b.dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("start pgbouncer: %w", err)
			close(b.exited)
			return
		}
		b.cmd = cmd
		started <- nil
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	if err := <-started; err != nil {
		return fail(err)
	}
	if err := b.waitReady(ctx); err != nil {
		_ = b.Stop()
		return nil, err
	}
	return b, nil
}

func bouncerINI(serverPort, port int, dir string, opts BouncerOptions) string {
	mode := opts.PoolMode
	if mode == "" {
		mode = "transaction"
	}
	size := opts.DefaultPoolSize
	if size == 0 {
		size = 20
	}
	lines := []string{
		"[databases]",
		fmt.Sprintf("* = host=127.0.0.1 port=%d", serverPort),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		fmt.Sprintf("listen_port = %d", port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "userlist.txt"),
		"logfile = " + filepath.Join(dir, "pgbouncer.log"),
		"pool_mode = " + mode,
		fmt.Sprintf("default_pool_size = %d", size),
		"max_client_conn = 1000",
		"ignore_startup_parameters = extra_float_digits",
	}
	lines = append(lines, opts.Settings...)
	return strings.Join(lines, "\n") + "\n"
}

func (b *Bouncer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-b.exited:
			return fmt.Errorf("pgbouncer exited during start-up (%w); log:\n%s", b.waitErr, b.Log())
		default:
		}
		conn, err := pgx.Connect(ctx, b.URL("postgres")+"&default_query_exec_mode=exec")
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer not ready: %w (last error: %w); log:\n%s", ctx.Err(), lastErr, b.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is a connection URL for database through the pooler, as the cluster's superuser. It carries
// no query mode: callers add the one they test.
func (b *Bouncer) URL(database string) string {
	u := url.URL{
		Scheme: "postgres", User: url.User(Superuser),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)), Path: "/" + database, RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the pooler's loopback port.
func (b *Bouncer) Port() int { return b.port }

// Log is PgBouncer's log file.
func (b *Bouncer) Log() string {
	out, err := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	if err != nil {
		return "(no pgbouncer log: " + err.Error() + ")"
	}
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return string(out)
}

// Stop terminates PgBouncer (SIGTERM: an immediate shutdown) and removes its
// directory. It is safe to call more than once.
func (b *Bouncer) Stop() error {
	if b.cmd != nil && b.cmd.Process != nil {
		select {
		case <-b.exited:
		default:
			_ = b.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-b.exited:
			case <-time.After(10 * time.Second):
				_ = b.cmd.Process.Kill()
				<-b.exited
			}
		}
	}
	return os.RemoveAll(b.dir)
}
