package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/releasetag"
)

// releaseSettings are a repository's effective settings, each from the first that sets it: its
// row in repository_release_settings, its installation's row in installation_release_settings,
// the deployment's configuration.
type releaseSettings struct {
	WorkflowFile string
	TagPattern   string
	Enabled      bool
	// Excluded are tag patterns that start no release even when TagPattern matches (*-rc*).
	Excluded []string
}

// settingsColumns reads the layered settings; it needs repositories r and the two settings
// tables joined as s (repository) and d (installation).
const settingsColumns = `coalesce(s.workflow_file, d.workflow_file), coalesce(s.tag_pattern, d.tag_pattern),
	coalesce(s.enabled, d.enabled), coalesce(s.excluded_tag_patterns, d.excluded_tag_patterns)`

const settingsJoins = `LEFT JOIN repository_release_settings s ON s.repository_id = r.id
	LEFT JOIN installation_release_settings d ON d.installation_id = r.installation_id`

// layer applies what the rows set over the configured defaults.
func (s *releaseSettings) layer(wf, tp *string, enabled *bool, excluded []string) {
	if wf != nil {
		s.WorkflowFile = *wf
	}
	if tp != nil {
		s.TagPattern = *tp
	}
	if enabled != nil {
		s.Enabled = *enabled
	}
	if excluded != nil {
		s.Excluded = excluded
	}
}

// releases reports whether tag starts a release: it matches the tag pattern and none of the
// excluded patterns (pkg/releasetag, which brops release-runs create applies too). An invalid
// pattern is an error (brops validates them; SQL may not have).
func (s releaseSettings) releases(tag string) (bool, error) {
	refusal, err := releasetag.Check(s.TagPattern, s.Excluded, tag)
	return err == nil && refusal == "", err
}

func (h *Handlers) defaults() releaseSettings {
	return releaseSettings{WorkflowFile: h.cfg.WorkflowFile, TagPattern: h.cfg.TagPattern, Enabled: true}
}

func (h *Handlers) settings(ctx context.Context, tx pgx.Tx, repositoryID int64) (releaseSettings, error) {
	s := h.defaults()
	var wf, tp *string
	var enabled *bool
	var excluded []string
	err := tx.QueryRow(ctx, `SELECT `+settingsColumns+` FROM repositories r `+settingsJoins+` WHERE r.id = $1`,
		repositoryID).Scan(&wf, &tp, &enabled, &excluded)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("read release settings of repository %d: %w", repositoryID, err)
	}
	s.layer(wf, tp, enabled, excluded)
	return s, nil
}

// pushTarget is what the push rules need, read in one statement.
type pushTarget struct {
	active, archived, removed, belongs bool
	settings                           releaseSettings
}

// pushTarget reads the installation's activity, the repository's state and its effective release
// settings for a push received at received; pgx.ErrNoRows when the repository or the installation
// is not recorded yet. belongs is false when the repository is recorded under another installation
// than the delivery's. archived is set only when the repository was archived by a delivery received
// after the push (migration 00085): GitHub refuses a push to an archived repository, so a push
// proves that it was not archived then, and an archive received before it was undone before it, by
// an unarchive whose job may not have committed yet.
func (h *Handlers) pushTarget(ctx context.Context, tx pgx.Tx, installationID, repositoryID int64, received *time.Time) (pushTarget, error) {
	t := pushTarget{settings: h.defaults()}
	var wf, tp *string
	var enabled *bool
	var excluded []string
	err := tx.QueryRow(ctx, `
		SELECT i.deleted_at IS NULL AND i.suspended_at IS NULL,
		       r.archived AND r.archived_event_at IS NOT NULL AND r.archived_event_at > coalesce($3::timestamptz, now()),
		       r.removed_at IS NOT NULL, r.installation_id = i.id, `+settingsColumns+`
		FROM repositories r
		JOIN installations i ON i.id = $1
		`+settingsJoins+`
		WHERE r.id = $2`, installationID, repositoryID, received).Scan(&t.active, &t.archived, &t.removed, &t.belongs, &wf, &tp, &enabled, &excluded)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, err
	}
	if err != nil {
		return t, fmt.Errorf("read repository %d: %w", repositoryID, err)
	}
	t.settings.layer(wf, tp, enabled, excluded)
	return t, nil
}
