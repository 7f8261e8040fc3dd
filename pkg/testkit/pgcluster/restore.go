package pgcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// ArchiveSettings are the server settings that archive every completed WAL segment into dir
// (which NewArchiveDir creates): what a point-in-time restore replays.
func ArchiveSettings(dir string) []string {
	return []string{"archive_mode=on", "archive_timeout=1", fmt.Sprintf("archive_command=cp %%p %s/%%f", dir)}
}

// NewArchiveDir creates a WAL archive directory the server's user can write.
func NewArchiveDir() (string, error) {
	dir, err := os.MkdirTemp("", "boardreadyops-wal-archive-")
	if err != nil {
		return "", fmt.Errorf("create archive directory: %w", err)
	}
	cred, err := serverCredential()
	if err == nil {
		err = chownForServer(dir, cred)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// SwitchWAL closes the current WAL segment and waits until the archiver has copied it, so that
// the archive holds every commit made so far.
func (c *Cluster) SwitchWAL(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var segment string
	if err := conn.QueryRow(ctx, "SELECT pg_walfile_name(pg_switch_wal())").Scan(&segment); err != nil {
		return fmt.Errorf("switch WAL: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var last string
		if err := conn.QueryRow(ctx, "SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver").Scan(&last); err != nil {
			return err
		}
		if last >= segment {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("WAL segment %s not archived (last %q)", segment, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StartRestored starts a new cluster from a copy of the base backup in backupDataDir, replaying
// the WAL in archiveDir up to target (recovery_target_time, inclusive) and then promoting: a
// point-in-time restore. It returns once the restored server accepts writes. Stop removes it.
func StartRestored(ctx context.Context, backupDataDir, archiveDir string, target time.Time) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "boardreadyops-pg-restored-")
	if err != nil {
		return nil, fmt.Errorf("create restore directory: %w", err)
	}
	fail := func(err error) (*Cluster, error) { _ = os.RemoveAll(dir); return nil, err }
	if out, err := exec.CommandContext(ctx, "cp", "-a", backupDataDir, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("copy base backup: %w\n%s", err, out))
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "recovery.signal"), nil, 0o600); err != nil {
		return fail(err)
	}
	c, err := Start(ctx, Options{Dir: dir, Durable: true, Settings: []string{
		fmt.Sprintf("restore_command=cp %s/%%f %%p", archiveDir),
		"recovery_target_time=" + target.UTC().Format("2006-01-02 15:04:05.000000+00"),
		"recovery_target_action=promote",
	}})
	if err != nil {
		return fail(err)
	}
	c.temp = true
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(120 * time.Second)
	for {
		var recovering bool
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
			_ = c.Stop()
			return nil, err
		}
		if !recovering {
			return c, nil
		}
		if time.Now().After(deadline) {
			_ = c.Stop()
			return nil, fmt.Errorf("restored server still in recovery after 120 s; log:\n%s", c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
