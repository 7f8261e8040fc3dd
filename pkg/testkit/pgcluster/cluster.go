package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/testkit/freeport"
)

// Options configure a private cluster. The zero value is a throw-away test cluster: data in a new
// temporary directory (removed by Stop), a free port, durability off.
type Options struct {
	// Dir holds the cluster (data/, the socket and server.log). Empty means a new temporary
	// directory that Stop removes. A non-empty Dir is kept, and an existing cluster in it is
	// reused, so a local run keeps its data across restarts.
	Dir string
	// Port to listen on at 127.0.0.1; 0 picks a free one.
	Port int
	// Durable keeps fsync and synchronous commit on. Tests leave it off: they never need a
	// crash-safe cluster, and it makes them much faster.
	Durable bool
	// MaxConnections is the server's max_connections; 0 means 300.
	MaxConnections int
	// Settings are extra "name=value" server settings passed with -c.
	Settings []string
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	dir     string
	port    int
	temp    bool
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// What Resume needs to start the same server again.
	binDir, dataDir string
	cred            *syscall.Credential
	opts            Options
}

// Superuser is the bootstrap superuser of every private cluster; it authenticates by trust on
// loopback only, and the server never listens beyond 127.0.0.1.
const Superuser = "postgres"

// Start initialises the cluster when its directory is new, starts the server and waits until it
// accepts connections or ctx ends.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}

	c := &Cluster{dir: opts.Dir, port: opts.Port, exited: make(chan struct{})}
	if c.dir == "" {
		c.temp = true
		if c.dir, err = os.MkdirTemp("", "boardreadyops-pg-"); err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	if c.dir, err = filepath.Abs(c.dir); err != nil {
		return nil, fmt.Errorf("resolve cluster directory: %w", err)
	}
	fail := func(err error) (*Cluster, error) {
		if c.temp {
			_ = os.RemoveAll(c.dir)
		}
		return nil, err
	}
	if err := chownForServer(c.dir, cred); err != nil {
		return fail(err)
	}
	if c.port == 0 {
		if c.port, err = freeport.Port(); err != nil {
			return fail(err)
		}
	}

	dataDir := filepath.Join(c.dir, "data")
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.initdb(ctx, binDir, dataDir, cred); err != nil {
			return fail(err)
		}
	}
	c.binDir, c.dataDir, c.cred, c.opts = binDir, dataDir, cred, opts
	if err := c.startServer(binDir, dataDir, cred, opts); err != nil {
		return fail(err)
	}
	if err := c.waitReady(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) initdb(ctx context.Context, binDir, dataDir string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", dataDir, "-U", Superuser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.Env = serverEnv()
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", dataDir, err, out)
	}
	return nil
}

func (c *Cluster) startServer(binDir, dataDir string, cred *syscall.Credential, opts Options) error {
	maxConns := opts.MaxConnections
	if maxConns == 0 {
		maxConns = 300
	}
	args := []string{
		"-D", dataDir,
		"-p", strconv.Itoa(c.port),
		"-k", c.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=" + strconv.Itoa(maxConns),
		"-c", "shared_buffers=256MB",
		"-c", "log_min_messages=warning",
		"-c", "logging_collector=off",
	}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, s := range opts.Settings {
		args = append(args, "-c", s)
	}
	logFile, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}

	// The parent-death signal is delivered when the thread that forked the child exits, not the
	// process. Starting and waiting on one locked goroutine ties it to a thread that lives exactly
	// as long as this process wants the server.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
		cmd.Env = serverEnv()
		cmd.Dir = c.dir
		cmd.Stdout = logFile
		cmd.Stderr = logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("start postgres: %w", err)
			close(c.exited)
			return
		}
		c.cmd = cmd
		started <- nil
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return <-started
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start-up (%w); log:\n%s", c.waitErr, c.logTail())
		default:
		}
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w (last error: %w); log:\n%s", ctx.Err(), lastErr, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// URL is a connection URL for database as the bootstrap superuser over loopback TCP.
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(Superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// Stop shuts the server down (fast shutdown: sessions are disconnected, nothing is lost that was
// committed) and removes a temporary cluster directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				_ = c.cmd.Process.Signal(syscall.SIGQUIT)
				<-c.exited
			}
		}
	}
	if c.temp {
		if err := os.RemoveAll(c.dir); err != nil {
			return fmt.Errorf("remove cluster directory: %w", err)
		}
	}
	return nil
}

// Interrupt stops the server and keeps its data, for fault-injection tests: a fast shutdown
// (SIGINT: sessions disconnected, a clean checkpoint) or, with immediate, an immediate one
// (SIGQUIT: no checkpoint, crash recovery on the next start). Resume starts it again. Neither may
// run concurrently with Stop.
func (c *Cluster) Interrupt(immediate bool) {
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(sig)
	<-c.exited
}

// Resume starts an interrupted server again on the same port and data and waits until it accepts
// connections (after crash recovery, when the shutdown was immediate).
func (c *Cluster) Resume(ctx context.Context) error {
	c.exited = make(chan struct{})
	c.waitErr = nil
	if err := c.startServer(c.binDir, c.dataDir, c.cred, c.opts); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

func (c *Cluster) logPath() string { return filepath.Join(c.dir, "server.log") }

func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logPath())
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// FindBinDir locates PostgreSQL's server binaries: the directory of initdb on PATH (following
// symlinks, as Debian's wrappers are links), else the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			dir := filepath.Dir(resolved)
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or under " +
		"/usr/lib/postgresql/*/bin: install them (Debian: apt-get install postgresql) or set TEST_DATABASE_URL")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// serverCredential returns the identity the server runs as: nil (the caller's) unless the caller
// is root, which PostgreSQL refuses; then the unprivileged "nobody" user.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs an unprivileged user: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func chownForServer(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("chmod cluster directory: %w", err)
	}
	err := filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(cred.Uid), int(cred.Gid))
	})
	if err != nil {
		return fmt.Errorf("hand cluster directory to the server user: %w", err)
	}
	// The server user must be able to reach the directory.
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("cluster directory %s is not reachable by the unprivileged server user: %s is mode %v",
				dir, p, st.Mode().Perm())
		}
	}
	return nil
}

func serverEnv() []string {
	env := []string{"LC_ALL=C", "LANG=C"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "TZ=") {
			env = append(env, kv)
		}
	}
	return env
}
