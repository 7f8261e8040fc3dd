package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby takes a base backup of c with pg_basebackup (WAL streamed, standby.signal and
// primary_conninfo written) into a new temporary directory and starts it as a streaming hot
// standby named name: its walreceiver reports name as application_name, the name
// synchronous_standby_names lists. The standby is durable; Stop removes its directory.
func (c *Cluster) StartStandby(ctx context.Context, name string, settings ...string) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "boardreadyops-pg-standby-")
	if err != nil {
		return nil, fmt.Errorf("create standby directory: %w", err)
	}
	if err := c.BaseBackup(ctx, filepath.Join(dir, "data"), true); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s, err := Start(ctx, Options{Dir: dir, Durable: true, Settings: append([]string{"cluster_name=" + name}, settings...)})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.temp = true
	return s, nil
}

// BaseBackup writes a base backup of c into dataDir (which must not exist or be empty) with
// pg_basebackup over the replication protocol, streaming the WAL it needs alongside. With
// standby, it also writes standby.signal and primary_conninfo (-R).
func (c *Cluster) BaseBackup(ctx context.Context, dataDir string, standby bool) error {
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", Superuser, "-D", dataDir,
		"-X", "stream", "-c", "fast", "--no-sync"}
	if standby {
		args = append(args, "-R")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "pg_basebackup"), args...)
	cmd.Env = serverEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	return nil
}

// Kill sends SIGKILL to the server and every process of it (the postmaster's process group):
// no shutdown checkpoint, no goodbye to clients or standbys, as when its machine dies. The data
// stays; Resume would run crash recovery.
func (c *Cluster) Kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
}

// Promote ends a standby's recovery (pg_promote) and waits until it accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to standby: %w", err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if !ok {
		return errors.New("promote: the standby was not promoted within 60 s")
	}
	return nil
}

// WaitStreaming waits until standby (its application_name) streams from c and, when sync, is
// the synchronous one.
func (c *Cluster) WaitStreaming(ctx context.Context, standby string, sync bool) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var state, syncState string
		err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`, standby).Scan(&state, &syncState)
		if err == nil && state == "streaming" && (!sync || syncState == "sync") {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("standby %s not streaming: %w", standby, err)
			}
			return fmt.Errorf("standby %s not streaming (state %q, sync_state %q)", standby, state, syncState)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WALReceiverPID is the pid of a standby's walreceiver process (0 when none runs).
func (c *Cluster) WALReceiverPID(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var pid int
	err = conn.QueryRow(ctx, `SELECT coalesce((SELECT pid FROM pg_stat_wal_receiver), 0)`).Scan(&pid)
	return pid, err
}
