package handler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// A repository's membership is ordered per installation (migration 00081; docs/lifecycle.md).
// Lifecycle commits the jobs of several loops and replicas in any order, so each change records its
// delivery's received_at in repository_memberships: for each (repository, installation), the newest
// delivery that gave the installation the repository (added, listed by installation created,
// transferred in) and the newest that took it away (removed, installation deleted).
// repositories.deleted_event_at keeps the newest repository deleted, which takes it from every
// installation, and installations.deleted_event_at the newest installation deleted, which takes
// from it every repository it got before (also one a membership change records later from an
// older delivery). A repository first recorded by another event (a push: ensureRepository,
// Prepare) has no time: its installation counts as having got it before anything else, since a
// push committed late must not outrank the membership changes received after it. The repository's
// installation and removed_at derive from them (resolveMemberships): the installation that got it
// last owns it, present while its own newest removal and both deletions are older. So a removal
// counts only against its own installation, and a transfer received before the old installation's
// removal but committed after it still moves the repository. A repository's rows are changed under
// its repositories row lock, taken in id order as every writer of repositories takes them, after a
// lock on a gaining installation's row: an installation's deletion holds that row while it lists
// the installation's repositories.

// membershipChange is what a delivery says of its installation's access to repositories.
type membershipChange string

const (
	gained membershipChange = "present_event_at" // added, listed by installation created, transferred in
	lost   membershipChange = "removed_event_at" // removed, installation deleted
)

// receivedAt is the time a membership change counts at: its delivery's, which a job always has;
// none counts as now.
func receivedAt(job Job) *time.Time {
	if job.ReceivedAt.IsZero() {
		return nil
	}
	return &job.ReceivedAt
}

// nameNewer is the condition that a name received at received (a statement parameter, typed) is
// not older than the one the repository has.
func nameNewer(received string) string {
	return `(repositories.name_event_at IS NULL OR repositories.name_event_at <= coalesce(` + received + `, now()))`
}

// sortedRefs is refs in id order, each id once: rows are locked in key order, as every writer of
// repositories locks them, and one statement may not change a row twice.
func sortedRefs(refs []eventdoc.RepositoryRef) []eventdoc.RepositoryRef {
	out := slices.Clone(refs)
	slices.SortFunc(out, func(a, b eventdoc.RepositoryRef) int { return cmp.Compare(a.ID, b.ID) })
	return slices.CompactFunc(out, func(a, b eventdoc.RepositoryRef) bool { return a.ID == b.ID })
}

func refColumns(refs []eventdoc.RepositoryRef) (ids []int64, names []string) {
	for _, r := range refs {
		ids, names = append(ids, r.ID), append(names, r.FullName)
	}
	return ids, names
}

// gainRepositories records that the installation was given refs. A repository not recorded yet is
// recorded under it; the name is taken when it is not older than the repository's. It returns how
// many of refs the delivery is its installation's newest word on.
func gainRepositories(ctx context.Context, tx pgx.Tx, installationID int64, refs []eventdoc.RepositoryRef, received *time.Time) (int64, error) {
	ids, names := refColumns(sortedRefs(refs))
	if len(ids) == 0 {
		return 0, nil
	}
	// A deletion of the installation committing now has listed its repositories: wait for it, so
	// that this gain sees its time. The lock is the one the installation's other writers take
	// (upsertInstallation, the installation's own events): a weaker one, upgraded later in the same
	// transaction, deadlocks with another batch doing the same. Then the lock on each row, in id
	// order.
	if _, err := tx.Exec(ctx, `SELECT FROM installations WHERE id = $1 FOR NO KEY UPDATE`, installationID); err != nil {
		return 0, fmt.Errorf("lock installation %d: %w", installationID, err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO repositories AS repositories (id, installation_id, full_name, membership_event_at, name_event_at)
		SELECT t.id, $1, t.full_name, coalesce($4, now()), coalesce($4, now()) FROM unnest($2::bigint[], $3::text[]) AS t(id, full_name)
		ORDER BY t.id
		ON CONFLICT (id) DO UPDATE SET
			full_name = CASE WHEN `+nameNewer("$4::timestamptz")+` THEN EXCLUDED.full_name ELSE repositories.full_name END,
			name_event_at = greatest(repositories.name_event_at, EXCLUDED.name_event_at), updated_at = now()`,
		installationID, ids, names, received); err != nil {
		return 0, fmt.Errorf("record repositories of installation %d: %w", installationID, err)
	}
	return changeMemberships(ctx, tx, installationID, ids, gained, received)
}

// loseRepositories records that the installation lost refs. A repository not recorded yet is
// recorded removed, so that an older addition does not bring it back. It returns how many of refs
// the delivery is its installation's newest word on.
func loseRepositories(ctx context.Context, tx pgx.Tx, installationID int64, refs []eventdoc.RepositoryRef, received *time.Time) (int64, error) {
	ids, names := refColumns(sortedRefs(refs))
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO repositories (id, installation_id, full_name, removed_at, membership_event_at)
		SELECT t.id, $1, t.full_name, now(), coalesce($4, now()) FROM unnest($2::bigint[], $3::text[]) AS t(id, full_name)
		ORDER BY t.id
		ON CONFLICT (id) DO UPDATE SET updated_at = repositories.updated_at -- the lock, in id order with the new rows
		`, installationID, ids, names, received); err != nil {
		return 0, fmt.Errorf("record removed repositories of installation %d: %w", installationID, err)
	}
	return changeMemberships(ctx, tx, installationID, ids, lost, received)
}

// loseInstallationRepositories records that a deleted installation lost every repository: those
// it owns or has a membership of now, through their memberships, and those a membership change
// records later from an older delivery, through installations.deleted_event_at. It holds the
// installation's row (updated first), so no gain for it commits between the list and the change.
// It returns how many the delivery is the installation's newest word on.
func loseInstallationRepositories(ctx context.Context, tx pgx.Tx, installationID int64, received *time.Time) (int64, error) {
	if _, err := tx.Exec(ctx, `UPDATE installations SET deleted_event_at = greatest(deleted_event_at, coalesce($2, now()))
		WHERE id = $1`, installationID, received); err != nil {
		return 0, fmt.Errorf("record the deletion of installation %d: %w", installationID, err)
	}
	ids, err := installationRepositories(ctx, tx, []int64{installationID})
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if err := lockRepositories(ctx, tx, ids); err != nil {
		return 0, err
	}
	return changeMemberships(ctx, tx, installationID, ids, lost, received)
}

// installationRepositories lists, in id order, the repositories the installations own or have a
// membership of: those an installation's deletion takes.
func installationRepositories(ctx context.Context, tx pgx.Tx, installationIDs []int64) ([]int64, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM repositories WHERE installation_id = ANY($1)
		UNION SELECT repository_id FROM repository_memberships WHERE installation_id = ANY($1) ORDER BY 1`, installationIDs)
	if err != nil {
		return nil, fmt.Errorf("list the repositories of installations %v: %w", installationIDs, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list the repositories of installations %v: %w", installationIDs, err)
	}
	return ids, nil
}

// deleteRepository records a repository deleted, which takes it from every installation whose
// membership is older. The repository is recorded. It reports whether the delivery is the newest
// deletion.
func deleteRepository(ctx context.Context, tx pgx.Tx, id int64, received *time.Time) (bool, error) {
	if err := lockRepositories(ctx, tx, []int64{id}); err != nil {
		return false, err
	}
	if err := ownersMemberships(ctx, tx, []int64{id}); err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, `UPDATE repositories SET deleted_event_at = coalesce($2, now()), updated_at = now()
		WHERE id = $1 AND (deleted_event_at IS NULL OR deleted_event_at <= coalesce($2, now()))`, id, received)
	if err != nil {
		return false, fmt.Errorf("delete repository %d: %w", id, err)
	}
	return tag.RowsAffected() > 0, resolveMemberships(ctx, tx, []int64{id}, received)
}

func lockRepositories(ctx context.Context, tx pgx.Tx, ids []int64) error {
	// NO KEY UPDATE: the key is not changed, and a stronger lock would also wait for the KEY SHARE
	// locks of release runs being created for these repositories.
	if _, err := tx.Exec(ctx, `SELECT FROM repositories WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, ids); err != nil {
		return fmt.Errorf("lock repositories: %w", err)
	}
	return nil
}

// changeMemberships records the change for the installation's rows of ids (recorded and locked,
// in id order), then derives the repositories' state. A change counts as the installation's newest
// word on a repository when it is newer than the installation's opposite change, and a gain also
// newer than the repository's deletion and the installation's.
func changeMemberships(ctx context.Context, tx pgx.Tx, installationID int64, ids []int64, change membershipChange, received *time.Time) (int64, error) {
	if err := ownersMemberships(ctx, tx, ids); err != nil {
		return 0, err
	}
	other := gained
	if change == gained {
		other = lost
	}
	// change and other are constant column names.
	var newest int64
	if err := tx.QueryRow(ctx, `
		WITH t AS (SELECT coalesce($3::timestamptz, now()) AS at), changed AS (
			INSERT INTO repository_memberships AS m (repository_id, installation_id, `+string(change)+`)
			SELECT x.id, $1, t.at FROM unnest($2::bigint[]) AS x(id), t ORDER BY x.id
			ON CONFLICT (repository_id, installation_id) DO UPDATE
			SET `+string(change)+` = greatest(m.`+string(change)+`, EXCLUDED.`+string(change)+`), updated_at = now()
			RETURNING m.repository_id, m.`+string(change)+` AS at, m.`+string(other)+` AS opposite
		)
		SELECT count(*) FROM changed c JOIN repositories r ON r.id = c.repository_id
		CROSS JOIN t LEFT JOIN installations i ON i.id = $1
		WHERE c.at = t.at AND (c.opposite IS NULL OR c.opposite < c.at)
		  AND ($4 OR ((r.deleted_event_at IS NULL OR r.deleted_event_at < c.at) AND (i.deleted_event_at IS NULL OR i.deleted_event_at < c.at)))`,
		installationID, ids, received, change == lost).Scan(&newest); err != nil {
		return 0, fmt.Errorf("record membership of installation %d: %w", installationID, err)
	}
	return newest, resolveMemberships(ctx, tx, ids, received)
}

// ownersMemberships gives each repository of ids whose installation has no membership row yet
// (recorded before 00081, or first seen in another event) one from what the repository records:
// present or removed at membership_event_at, the time of the delivery that recorded it or last
// changed it, or before anything else when it has none. The repositories are locked.
func ownersMemberships(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if _, err := tx.Exec(ctx, `
		INSERT INTO repository_memberships (repository_id, installation_id, present_event_at, removed_event_at)
		SELECT r.id, r.installation_id,
			CASE WHEN r.removed_at IS NULL THEN coalesce(r.membership_event_at, '-infinity') END,
			CASE WHEN r.removed_at IS NOT NULL THEN coalesce(r.membership_event_at, '-infinity') END
		FROM repositories r WHERE r.id = ANY($1) ORDER BY r.id
		ON CONFLICT (repository_id, installation_id) DO NOTHING`, ids); err != nil {
		return fmt.Errorf("record repositories' memberships: %w", err)
	}
	return nil
}

// resolveMemberships derives each repository's installation and removed_at from its memberships:
// the installation that got it last owns it, present while that installation's newest removal,
// its deletion and the repository's deletion are older. membership_event_at keeps the newest
// change's time, for a previous release's lifecycle.
func resolveMemberships(ctx context.Context, tx pgx.Tx, ids []int64, received *time.Time) error {
	_, err := tx.Exec(ctx, `
		UPDATE repositories r
		SET installation_id = o.installation_id,
			removed_at = CASE WHEN o.present THEN NULL ELSE coalesce(r.removed_at, now()) END,
			membership_event_at = greatest(r.membership_event_at, coalesce($2, now())), updated_at = now()
		FROM (
			SELECT x.id, w.installation_id,
				w.present_event_at IS NOT NULL
				AND (w.removed_event_at IS NULL OR w.present_event_at > w.removed_event_at)
				AND (x.deleted_event_at IS NULL OR w.present_event_at > x.deleted_event_at)
				AND (i.deleted_event_at IS NULL OR w.present_event_at > i.deleted_event_at) AS present
			FROM repositories x
			CROSS JOIN LATERAL (
				SELECT m.installation_id, m.present_event_at, m.removed_event_at
				FROM repository_memberships m WHERE m.repository_id = x.id
				ORDER BY m.present_event_at DESC NULLS LAST, m.installation_id = x.installation_id DESC
				LIMIT 1
			) w
			LEFT JOIN installations i ON i.id = w.installation_id
			WHERE x.id = ANY($1)
		) o
		WHERE r.id = o.id`, ids, received)
	if err != nil {
		return fmt.Errorf("derive repository memberships: %w", err)
	}
	return nil
}

// membershipResult is the outcome of a membership change that is its installation's newest word
// on n repositories: one older than the installation's last word on each changes none, and is
// logged and counted as ignored.
func (h *Handlers) membershipResult(d *eventdoc.Document, n int64, received *time.Time) Result {
	if n > 0 {
		return applied(0)
	}
	h.logger.Info("repository membership change older than the one applied; ignored", "event", d.Event, "action", d.Action,
		"installation_id", d.InstallationID, "received_at", received)
	return ignored()
}

// LockMemberships takes, at the start of a batch's transaction, the installation and repository
// locks its jobs will take: the installations of its installation and installation_repositories
// events and of its repository transfers, then the repositories those list and every repository
// event names, with those an installation deletion will find recorded, each set in id order. A
// batch handles its jobs one after another, each locking its own rows, so two batches with changes
// of two installations or repositories in the other order deadlocked (PostgreSQL breaks it after
// deadlock_timeout, a second, and the batch is redone). Taken first, in one order, the locks queue
// instead. A batch of pushes and workflow runs takes none: they lock neither (foreign keys take KEY
// SHARE, which these locks let through).
func LockMemberships(ctx context.Context, tx pgx.Tx, docs []eventdoc.Document) error {
	var installations, repositories, deleted []int64
	for i := range docs {
		d := &docs[i]
		switch {
		case d.Event == eventdoc.EventInstallation && d.Installation != nil:
			installations = append(installations, d.Installation.ID)
			if d.Action == "created" {
				for _, r := range d.Repositories {
					repositories = append(repositories, r.ID)
				}
			}
			if d.Action == "deleted" {
				deleted = append(deleted, d.Installation.ID)
			}
		case d.Event == eventdoc.EventInstallationRepositories && d.Installation != nil:
			installations = append(installations, d.Installation.ID)
			for _, r := range append(slices.Clone(d.RepositoriesAdded), d.RepositoriesRemoved...) {
				repositories = append(repositories, r.ID)
			}
		case d.Event == eventdoc.EventRepository && d.Repository != nil:
			repositories = append(repositories, d.Repository.ID)
			if d.Action == "transferred" {
				installations = append(installations, d.InstallationID)
			}
		}
	}
	if len(installations)+len(repositories) == 0 {
		return nil
	}
	slices.Sort(installations)
	if _, err := tx.Exec(ctx, `SELECT FROM installations WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE`, slices.Compact(installations)); err != nil {
		return fmt.Errorf("lock the batch's installations: %w", err)
	}
	if len(deleted) > 0 {
		// What loseInstallationRepositories will find: the installations are locked, so no gain
		// for them adds to it meanwhile.
		ids, err := installationRepositories(ctx, tx, deleted)
		if err != nil {
			return err
		}
		repositories = append(repositories, ids...)
	}
	slices.Sort(repositories)
	return lockRepositories(ctx, tx, slices.Compact(repositories))
}
