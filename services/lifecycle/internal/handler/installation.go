package handler

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

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

// ensureRepository records a repository first seen through an event, without locking an existing row.
func ensureRepository(ctx context.Context, tx pgx.Tx, installationID int64, repo *eventdoc.Repository) error {
	if err := ensureInstallation(ctx, tx, installationID, repo); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO repositories (id, installation_id, full_name, default_branch, archived)
		VALUES ($1, $2, $3, nullif($4, ''), $5) ON CONFLICT (id) DO NOTHING`,
		repo.ID, installationID, repo.FullName, repo.DefaultBranch, repo.Archived)
	if err != nil {
		return fmt.Errorf("record repository %d: %w", repo.ID, err)
	}
	return nil
}

// Membership changes (a repository added, removed, transferred or deleted) are applied in the
// order ingest received them (migration 00078): each records its delivery's received_at in
// membership_event_at, and one older than the last applied leaves the repository as it is. A
// removal counts only against the installation that owns the repository, and a deletion records
// the deleting delivery's installation as the owner, so that nothing older brings a deleted
// repository back. The name is ordered the same way by name_event_at, whoever owns the repository:
// a rename committed before an older transfer keeps the new name. A job always has its inbox row's
// time; none counts as now. One time per repository cannot order everything across the two
// installations of a transfer: docs/lifecycle.md says what is left.
func receivedAt(job Job) *time.Time {
	if job.ReceivedAt.IsZero() {
		return nil
	}
	return &job.ReceivedAt
}

// membershipNewer is the condition that a membership change received at received (a statement
// parameter, typed) is not older than the one last applied.
func membershipNewer(received string) string {
	return `(repositories.membership_event_at IS NULL OR repositories.membership_event_at <= coalesce(` + received + `, now()))`
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

// upsertRepositoryRefs records refs as the installation's, present. It returns how many it changed.
func upsertRepositoryRefs(ctx context.Context, tx pgx.Tx, installationID int64, refs []eventdoc.RepositoryRef, received *time.Time) (int64, error) {
	var n int64
	for _, r := range sortedRefs(refs) {
		tag, err := tx.Exec(ctx, `
			INSERT INTO repositories (id, installation_id, full_name, membership_event_at, name_event_at)
			VALUES ($1, $2, $3, coalesce($4, now()), coalesce($4, now()))
			ON CONFLICT (id) DO UPDATE SET installation_id = EXCLUDED.installation_id, removed_at = NULL,
				full_name = CASE WHEN `+nameNewer("$4::timestamptz")+` THEN EXCLUDED.full_name ELSE repositories.full_name END,
				name_event_at = greatest(repositories.name_event_at, EXCLUDED.name_event_at),
				membership_event_at = EXCLUDED.membership_event_at, updated_at = now()
			WHERE `+membershipNewer("$4::timestamptz"),
			r.ID, installationID, r.FullName, received)
		if err != nil {
			return n, fmt.Errorf("record repository %d: %w", r.ID, err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// removeRepositoryRefs marks refs of the installation removed. One removed already still takes the
// newer time, so that an older addition by the same installation does not bring it back; one not
// recorded yet is recorded removed, for the same reason. It returns how many it changed.
func removeRepositoryRefs(ctx context.Context, tx pgx.Tx, installationID int64, refs []eventdoc.RepositoryRef, received *time.Time) (int64, error) {
	refs = sortedRefs(refs)
	ids := make([]int64, len(refs))
	names := make([]string, len(refs))
	for i, r := range refs {
		ids[i], names[i] = r.ID, r.FullName
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO repositories AS repositories (id, installation_id, full_name, removed_at, membership_event_at)
		SELECT t.id, $1, t.full_name, now(), coalesce($4, now()) FROM unnest($2::bigint[], $3::text[]) AS t(id, full_name)
		ORDER BY t.id
		ON CONFLICT (id) DO UPDATE SET removed_at = coalesce(repositories.removed_at, now()),
			membership_event_at = EXCLUDED.membership_event_at, updated_at = now()
		WHERE repositories.installation_id = EXCLUDED.installation_id AND `+membershipNewer("$4::timestamptz"),
		installationID, ids, names, received)
	if err != nil {
		return 0, fmt.Errorf("remove repositories of installation %d: %w", installationID, err)
	}
	return tag.RowsAffected(), nil
}

// removeInstallationRepositories marks every repository of a deleted installation removed. It
// returns how many it changed.
func removeInstallationRepositories(ctx context.Context, tx pgx.Tx, installationID int64, received *time.Time) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE repositories SET removed_at = coalesce(removed_at, now()),
			membership_event_at = coalesce($2, now()), updated_at = now()
		WHERE installation_id = $1 AND `+membershipNewer("$2::timestamptz"), installationID, received)
	if err != nil {
		return 0, fmt.Errorf("remove repositories of installation %d: %w", installationID, err)
	}
	return tag.RowsAffected(), nil
}

// membershipResult is the outcome of a membership change that changed n repositories: an older
// delivery than the one last applied changes none, and is logged and counted as ignored.
func (h *Handlers) membershipResult(d *eventdoc.Document, n int64, received *time.Time) Result {
	if n > 0 {
		return applied(0)
	}
	h.logger.Info("repository membership change older than the one applied; ignored", "event", d.Event, "action", d.Action,
		"installation_id", d.InstallationID, "received_at", received)
	return ignored()
}

// installation: created, deleted, suspend, unsuspend, new_permissions_accepted.
//
// created, deleted, suspend and unsuspend are applied in the order ingest received them
// (00033): one older than the last applied leaves the installation as it is, whichever lifecycle
// loop or replica commits first. The repositories they list or remove are ordered per repository
// (00078), so an older created still records those no newer change has touched.
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
	// ordered by its repository's own time (00078), whatever the installation's order says: a
	// created committed after the suspend received just after it still records its repositories.
	// One committed after a newer deletion records none: the deletion removed them all.
	var repos int64
	switch d.Action {
	case "created":
		deleted := false
		if !current {
			if err := tx.QueryRow(ctx, `SELECT deleted_at IS NOT NULL FROM installations WHERE id = $1`, in.ID).Scan(&deleted); err != nil {
				return Result{}, fmt.Errorf("read installation %d: %w", in.ID, err)
			}
		}
		if !deleted {
			repos, err = upsertRepositoryRefs(ctx, tx, in.ID, d.Repositories, received)
		}
	case "deleted":
		repos, err = removeInstallationRepositories(ctx, tx, in.ID, received)
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

// installation_repositories: added, removed, in the order received (migration 00078).
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
		refs, change := d.RepositoriesAdded, upsertRepositoryRefs
		if d.Action == "removed" {
			refs, change = d.RepositoriesRemoved, removeRepositoryRefs
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
// transferred and deleted change the repository's membership, in the order received (00078): a
// repository transferred into the delivery's installation is that installation's, and present; a
// deleted one is the deleting delivery's installation's, and removed. A rename never changes the
// owner, and is applied when it is not older than the name the repository has (00078).
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
		stmt = `UPDATE repositories SET installation_id = $3, removed_at = NULL,
			full_name = CASE WHEN ` + nameNewer("$4::timestamptz") + ` THEN $2 ELSE full_name END,
			name_event_at = greatest(name_event_at, coalesce($4, now())),
			membership_event_at = coalesce($4, now()), updated_at = now() WHERE id = $1 AND ` + membershipNewer("$4::timestamptz")
		args = append(args, r.FullName, d.InstallationID, receivedAt(job))
	case "archived":
		stmt = `UPDATE repositories SET archived = true, updated_at = now() WHERE id = $1`
	case "unarchived":
		stmt = `UPDATE repositories SET archived = false, updated_at = now() WHERE id = $1`
	case "deleted":
		stmt = `UPDATE repositories SET removed_at = coalesce(removed_at, now()), installation_id = $3,
			membership_event_at = coalesce($2, now()), updated_at = now() WHERE id = $1 AND ` + membershipNewer("$2::timestamptz")
		args = append(args, receivedAt(job), d.InstallationID)
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
	switch d.Action {
	case "transferred", "deleted":
		return h.membershipResult(d, tag.RowsAffected(), receivedAt(job)), nil
	case "renamed":
		if tag.RowsAffected() == 0 {
			h.logger.Info("rename older than the repository's name; ignored", "repository_id", r.ID,
				"installation_id", d.InstallationID, "received_at", job.ReceivedAt)
			return ignored(), nil
		}
	}
	return applied(0), nil
}

// Prepare records, before a batch's transaction, the installations and repositories its documents
// name that are not recorded yet — in id order and committed at once. Inside the batch they would
// be inserted in job order, and two batches inserting overlapping new rows in different orders
// deadlock (each deadlock costs PostgreSQL's deadlock_timeout, a second).
func Prepare(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, docs []eventdoc.Document) error {
	type repo struct {
		id, installation  int64
		fullName, owner   string
		ownerType, branch string
	}
	repos := map[int64]repo{}
	for _, d := range docs {
		if d.Repository == nil || d.Repository.ID <= 0 || d.InstallationID <= 0 || d.Repository.FullName == "" {
			continue
		}
		owner := d.Repository.OwnerLogin
		if owner == "" {
			owner, _, _ = strings.Cut(d.Repository.FullName, "/")
		}
		repos[d.Repository.ID] = repo{d.Repository.ID, d.InstallationID, d.Repository.FullName, owner, accountType(d.Repository.OwnerType), d.Repository.DefaultBranch}
	}
	if len(repos) == 0 {
		return nil
	}
	var ids, insts []int64
	var names, owners, types, branches []string
	for _, r := range repos {
		ids, insts = append(ids, r.id), append(insts, r.installation)
		names, owners, types, branches = append(names, r.fullName), append(owners, r.owner), append(types, r.ownerType), append(branches, r.branch)
	}
	_, err := db.Exec(ctx, `
		WITH input AS (
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
				AS t(id, installation_id, full_name, owner, owner_type, default_branch)
		), inst AS (
			INSERT INTO installations (id, account_login, account_type)
			SELECT DISTINCT ON (installation_id) installation_id, owner, owner_type FROM input ORDER BY installation_id
			ON CONFLICT (id) DO NOTHING
		)
		INSERT INTO repositories (id, installation_id, full_name, default_branch)
		SELECT id, installation_id, full_name, nullif(default_branch, '') FROM input
		WHERE full_name ~ '^[^/\s]+/[^/\s]+$' ORDER BY id
		ON CONFLICT (id) DO NOTHING`, ids, insts, names, owners, types, branches)
	if err != nil {
		return fmt.Errorf("record new installations and repositories: %w", err)
	}
	return nil
}
