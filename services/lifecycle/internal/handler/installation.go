package handler

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

var workflowFilePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}\.ya?ml$`)

func accountType(t string) string {
	switch t {
	case "User", "Organization", "Enterprise":
		return t
	}
	return "Organization"
}

// upsertInstallation records an installation from its own event (account details win).
func upsertInstallation(ctx context.Context, tx pgx.Tx, in *eventdoc.Installation) error {
	login := in.AccountLogin
	if login == "" {
		login = fmt.Sprintf("installation-%d", in.ID)
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET account_login = EXCLUDED.account_login,
			account_type = EXCLUDED.account_type, updated_at = now()
		WHERE $4`, in.ID, login, accountType(in.AccountType), in.AccountLogin != "")
	if err != nil {
		return fmt.Errorf("upsert installation %d: %w", in.ID, err)
	}
	return nil
}

// ensureInstallation records an installation first seen through a repository-level event, from
// the repository's owner. It never locks an existing row (ON CONFLICT DO NOTHING), so the hot
// push path does not serialize on its installation.
func ensureInstallation(ctx context.Context, tx pgx.Tx, id int64, repo *eventdoc.Repository) error {
	login := repo.OwnerLogin
	if login == "" {
		login, _, _ = strings.Cut(repo.FullName, "/")
	}
	_, err := tx.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO NOTHING`, id, login, accountType(repo.OwnerType))
	if err != nil {
		return fmt.Errorf("record installation %d: %w", id, err)
	}
	return nil
}

// ensureRepository records a repository first seen through an event, without locking an existing
// row. It records no membership time: a push or another event says nothing of the order of
// membership changes, and one committed late must not outrank them (00081). Under an installation
// already deleted (GitHub never reuses an installation's id) it is recorded removed.
func ensureRepository(ctx context.Context, tx pgx.Tx, installationID int64, repo *eventdoc.Repository) error {
	if err := ensureInstallation(ctx, tx, installationID, repo); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO repositories (id, installation_id, full_name, default_branch, archived, removed_at)
		SELECT $1, $2, $3, nullif($4, ''), $5, CASE WHEN i.deleted_event_at IS NOT NULL THEN now() END
		FROM installations i WHERE i.id = $2
		ON CONFLICT (id) DO NOTHING`,
		repo.ID, installationID, repo.FullName, repo.DefaultBranch, repo.Archived)
	if err != nil {
		return fmt.Errorf("record repository %d: %w", repo.ID, err)
	}
	return nil
}

// installation: created, deleted, suspend, unsuspend, new_permissions_accepted.
//
// created, deleted, suspend and unsuspend are applied in the order ingest received them
// (00033): one older than the last applied leaves the installation as it is, whichever lifecycle
// loop or replica commits first. The repositories they list or remove are ordered per repository
// and installation (00081), so an older created still records those no newer change has touched.
func (h *Handlers) installation(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	in := d.Installation
	if in == nil || in.ID <= 0 {
		return ignored(), nil
	}
	if err := upsertInstallation(ctx, tx, in); err != nil {
		return Result{}, err
	}
	set, ok := installationStates[d.Action]
	if !ok {
		if d.Action == "new_permissions_accepted" {
			return applied(0), nil // recorded by the upsert above
		}
		return ignored(), nil
	}
	received := receivedAt(job)
	tag, err := tx.Exec(ctx, `UPDATE installations SET `+set+`, lifecycle_event_at = coalesce($2, now()), updated_at = now()
		WHERE id = $1 AND (lifecycle_event_at IS NULL OR lifecycle_event_at <= coalesce($2, now()))`, in.ID, received)
	if err != nil {
		return Result{}, fmt.Errorf("%s installation %d: %w", d.Action, in.ID, err)
	}
	current := tag.RowsAffected() > 0
	// The repositories a created lists, and those a deleted removes, are membership changes, each
	// ordered per repository and installation (00081), whatever the installation's order says: a
	// created committed after the suspend received just after it still records its repositories,
	// present; one committed after a newer deletion records them removed.
	var repos int64
	switch d.Action {
	case "created":
		repos, err = gainRepositories(ctx, tx, in.ID, d.Repositories, received)
	case "deleted":
		repos, err = loseInstallationRepositories(ctx, tx, in.ID, received)
	}
	if err != nil {
		return Result{}, err
	}
	if !current {
		h.logger.Info("installation event older than the one applied; ignored", "installation_id", in.ID,
			"action", d.Action, "received_at", job.ReceivedAt, "repositories_changed", repos)
		if repos > 0 {
			return applied(0), nil
		}
		return ignored(), nil
	}
	switch d.Action {
	case "deleted":
		return applied(0), h.deadLetterInstallation(ctx, tx, in.ID, "installation deleted")
	case "suspend":
		return applied(0), h.deadLetterInstallation(ctx, tx, in.ID, "installation suspended")
	}
	return applied(0), nil
}

// installationStates is what each ordered installation action sets (constant SQL fragments).
var installationStates = map[string]string{
	"created":   "deleted_at = NULL, suspended_at = NULL",
	"deleted":   "deleted_at = now()",
	"suspend":   "suspended_at = now()",
	"unsuspend": "suspended_at = NULL",
}

func (h *Handlers) deadLetterInstallation(ctx context.Context, tx pgx.Tx, installationID int64, why string) error {
	var n int64
	err := tx.QueryRow(ctx, `SELECT boardreadyops_outbox_dead_letter_installation($1, $2)`, installationID,
		why+": effect not delivered; replay it (brops outbox replay) if the installation returns").Scan(&n)
	if err != nil {
		return fmt.Errorf("dead-letter effects of installation %d: %w", installationID, err)
	}
	if n > 0 {
		h.logger.Info("dead-lettered undelivered effects", "installation_id", installationID, "reason", why, "count", n)
	}
	return nil
}

// installation_repositories: added, removed, ordered per installation (00081, membership.go).
func (h *Handlers) installationRepositories(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	if d.Installation == nil || d.Installation.ID <= 0 {
		return ignored(), nil
	}
	if err := upsertInstallation(ctx, tx, d.Installation); err != nil {
		return Result{}, err
	}
	id := d.Installation.ID
	switch d.Action {
	case "added", "removed":
		refs, change := d.RepositoriesAdded, gainRepositories
		if d.Action == "removed" {
			refs, change = d.RepositoriesRemoved, loseRepositories
		}
		if len(refs) == 0 {
			return applied(0), nil
		}
		n, err := change(ctx, tx, id, refs, receivedAt(job))
		if err != nil {
			return Result{}, err
		}
		return h.membershipResult(d, n, receivedAt(job)), nil
	}
	return ignored(), nil
}

// repository: renamed, archived, unarchived, deleted, transferred, edited (default branch), created.
// transferred and deleted change the repository's membership, ordered per installation (00081,
// membership.go): a repository transferred into the delivery's installation is given to it; a
// deleted one is taken from every installation whose membership is older. A rename never changes
// the owner, and is applied when it is not older than the name the repository has (00078).
func (h *Handlers) repository(ctx context.Context, tx pgx.Tx, job Job) (Result, error) {
	d := &job.Document
	r := d.Repository
	if err := ensureRepository(ctx, tx, d.InstallationID, r); err != nil {
		return Result{}, err
	}
	var stmt string
	args := []any{r.ID}
	switch d.Action {
	case "renamed":
		stmt = `UPDATE repositories SET full_name = $2, name_event_at = coalesce($3, now()), updated_at = now()
			WHERE id = $1 AND ` + nameNewer("$3::timestamptz")
		args = append(args, r.FullName, receivedAt(job))
	case "transferred":
		n, err := gainRepositories(ctx, tx, d.InstallationID, []eventdoc.RepositoryRef{{ID: r.ID, FullName: r.FullName}}, receivedAt(job))
		if err != nil {
			return Result{}, err
		}
		return h.membershipResult(d, n, receivedAt(job)), nil
	case "archived", "unarchived":
		// In the order received (migration 00085): an older delivery's flag is not applied.
		stmt = `UPDATE repositories SET archived = $2, archived_event_at = coalesce($3, now()), updated_at = now()
			WHERE id = $1 AND (archived_event_at IS NULL OR archived_event_at <= coalesce($3::timestamptz, now()))`
		args = append(args, d.Action == "archived", receivedAt(job))
	case "deleted":
		newest, err := deleteRepository(ctx, tx, r.ID, receivedAt(job))
		if err != nil {
			return Result{}, err
		}
		return h.membershipResult(d, map[bool]int64{true: 1}[newest], receivedAt(job)), nil
	case "edited":
		stmt = `UPDATE repositories SET default_branch = coalesce(nullif($2, ''), default_branch), updated_at = now() WHERE id = $1`
		args = append(args, r.DefaultBranch)
	case "created":
		return applied(0), nil // recorded by ensureRepository
	default:
		return ignored(), nil
	}
	tag, err := tx.Exec(ctx, stmt, args...)
	if err != nil {
		return Result{}, fmt.Errorf("repository %d %s: %w", r.ID, d.Action, err)
	}
	if tag.RowsAffected() == 0 && d.Action != "edited" {
		h.logger.Info("repository "+d.Action+" older than the state the repository has; ignored", "repository_id", r.ID,
			"installation_id", d.InstallationID, "received_at", job.ReceivedAt)
		return ignored(), nil
	}
	return applied(0), nil
}

// Prepare records, before a batch's transaction, the installations and repositories its documents
// name that are not recorded yet — in id order and committed at once. Inside the batch they would
// be inserted in job order, and two batches inserting overlapping new rows in different orders
// deadlock (each deadlock costs PostgreSQL's deadlock_timeout, a second); recorded, they are locked
// up front (LockMemberships). As in ensureRepository, a repository is recorded without a membership
// time, and removed under a deleted installation; one the batch's last list of it removes
// (installation_repositories removed) is recorded removed, so that what the batch will leave is
// recorded meanwhile. The batch's jobs then apply their changes, each with its own time, which
// outranks this record.
func Prepare(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, docs []eventdoc.Document) error {
	type repo struct {
		id, installation  int64
		fullName, owner   string
		ownerType, branch string
		removed, listed   bool
	}
	repos := map[int64]repo{}
	for _, d := range docs {
		if d.Repository != nil && d.Repository.ID > 0 && d.InstallationID > 0 && d.Repository.FullName != "" {
			owner := d.Repository.OwnerLogin
			if owner == "" {
				owner, _, _ = strings.Cut(d.Repository.FullName, "/")
			}
			repos[d.Repository.ID] = repo{d.Repository.ID, d.InstallationID, d.Repository.FullName, owner, accountType(d.Repository.OwnerType), d.Repository.DefaultBranch, false, false}
		}
		if d.Installation == nil || d.Installation.ID <= 0 {
			continue
		}
		// The last list of the batch wins, so that what the batch leaves is recorded meanwhile; a
		// document naming the repository whole wins over any list, as it did before lists counted.
		refs := func(rs []eventdoc.RepositoryRef, removed bool) {
			for _, r := range rs {
				if prev, ok := repos[r.ID]; ok && !prev.listed || r.ID <= 0 || r.FullName == "" {
					continue
				}
				owner, _, _ := strings.Cut(r.FullName, "/")
				repos[r.ID] = repo{r.ID, d.Installation.ID, r.FullName, owner, accountType(d.Installation.AccountType), "", removed, true}
			}
		}
		switch d.Event {
		case eventdoc.EventInstallation:
			if d.Action == "created" {
				refs(d.Repositories, false)
			}
		case eventdoc.EventInstallationRepositories:
			refs(d.RepositoriesAdded, false)
			refs(d.RepositoriesRemoved, true)
		}
	}
	if len(repos) == 0 {
		return nil
	}
	var ids, insts []int64
	var names, owners, types, branches []string
	var removed []bool
	for _, r := range repos {
		ids, insts = append(ids, r.id), append(insts, r.installation)
		names, owners, types, branches = append(names, r.fullName), append(owners, r.owner), append(types, r.ownerType), append(branches, r.branch)
		removed = append(removed, r.removed)
	}
	_, err := db.Exec(ctx, `
		WITH input AS (
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[])
				AS t(id, installation_id, full_name, owner, owner_type, default_branch, removed)
		), inst AS (
			INSERT INTO installations (id, account_login, account_type)
			SELECT DISTINCT ON (installation_id) installation_id, owner, owner_type FROM input ORDER BY installation_id
			ON CONFLICT (id) DO NOTHING
		)
		INSERT INTO repositories (id, installation_id, full_name, default_branch, removed_at)
		SELECT input.id, input.installation_id, input.full_name, nullif(input.default_branch, ''),
			CASE WHEN input.removed OR i.deleted_event_at IS NOT NULL THEN now() END
		FROM input LEFT JOIN installations i ON i.id = input.installation_id
		WHERE input.full_name ~ '^[^/\s]+/[^/\s]+$' ORDER BY input.id
		ON CONFLICT (id) DO NOTHING`, ids, insts, names, owners, types, branches, removed)
	if err != nil {
		return fmt.Errorf("record new installations and repositories: %w", err)
	}
	return nil
}
