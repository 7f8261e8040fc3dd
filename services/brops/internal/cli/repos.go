package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

// releaseSettingsRow is one row of repository_release_settings or installation_release_settings:
// nil means "not set here" (the next level decides).
type releaseSettingsRow struct {
	WorkflowFile *string  `json:"workflow_file,omitempty"`
	TagPattern   *string  `json:"tag_pattern,omitempty"`
	Enabled      *bool    `json:"enabled,omitempty"`
	Excluded     []string `json:"excluded_tag_patterns,omitempty"`
}

func (r releaseSettingsRow) empty() bool {
	return r.WorkflowFile == nil && r.TagPattern == nil && r.Enabled == nil && r.Excluded == nil
}

// settingsScope is what a settings command acts on: a repository or an installation's defaults.
type settingsScope struct {
	table, key, subject string
	id                  int64
	name                string
}

var workflowFilePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}\.ya?ml$`)

// validTagPattern checks a path.Match pattern as lifecycle applies it to a tag name.
func validTagPattern(flag, p string) error {
	if len(p) < 1 || len(p) > 200 || strings.TrimSpace(p) != p {
		return usageError{fmt.Errorf("%s %q: want 1 to 200 characters, no surrounding spaces", flag, p)}
	}
	if _, err := path.Match(p, "v1.0.0"); err != nil {
		return usageError{fmt.Errorf("%s %q is not a valid pattern (path.Match syntax: * ? [a-z] \\): %w", flag, p, err)}
	}
	return nil
}

func newReposCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "repos", Short: "Per-repository release settings"}
	settings := &cobra.Command{
		Use:   "settings",
		Short: "Get, set and unset release settings of a repository (or an installation's defaults)",
		Long: `Release settings, each taken from the first level that sets it: the repository, its installation
(--installation ID: defaults for every repository of the installation), the deployment
(lifecycle's BOARDREADYOPS_RELEASE_WORKFLOW, BOARDREADYOPS_RELEASE_TAG_PATTERN; enabled).

  workflow file          the release workflow dispatched (e.g. release.yml)
  tag pattern            which tags start a release (path.Match on the tag name, e.g. v*)
  excluded tag patterns  tags that start none even when the pattern matches (e.g. *-rc*; at most 20)
  enabled                false: no tag of the repository starts a release

Changes apply to the next push; runs already created keep their workflow file. Every set and
unset is audited with the old and new values.`,
	}
	var installation int64
	var defaultWorkflow, defaultPattern string
	scopeOf := func(ctx context.Context, q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, args []string) (settingsScope, error) {
		switch {
		case installation > 0 && len(args) == 0:
			s := settingsScope{table: "installation_release_settings", key: "installation_id", subject: "installation", id: installation,
				name: fmt.Sprintf("installation %d", installation)}
			var n int
			if err := q.QueryRow(ctx, `SELECT count(*) FROM installations WHERE id = $1`, installation).Scan(&n); err != nil {
				return s, fmt.Errorf("find installation: %w", err)
			}
			if n == 0 {
				return s, fmt.Errorf("installation %d is not recorded", installation)
			}
			return s, nil
		case installation == 0 && len(args) == 1 && strings.Count(args[0], "/") == 1:
			s := settingsScope{table: "repository_release_settings", key: "repository_id", subject: "repository", name: args[0]}
			// The repository a --repo of release-runs means: a name is not unique.
			var id *int64
			err := q.QueryRow(ctx, `SELECT `+repositoryNamed("$1"), args[0]).Scan(&id)
			if err == nil && id == nil {
				err = pgx.ErrNoRows
			}
			if id != nil {
				s.id = *id
			}
			if errors.Is(err, pgx.ErrNoRows) {
				return s, fmt.Errorf("repository %s is not recorded (BoardReadyOps learns repositories from the App's installation events and pushes)", args[0])
			}
			if err != nil {
				return s, fmt.Errorf("find repository: %w", err)
			}
			return s, nil
		}
		return settingsScope{}, usageError{errors.New("give a repository OWNER/NAME, or --installation ID for the installation's defaults")}
	}
	read := func(ctx context.Context, q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, s settingsScope, lock bool) (releaseSettingsRow, error) {
		var r releaseSettingsRow
		sql := `SELECT workflow_file, tag_pattern, enabled, excluded_tag_patterns FROM ` + s.table + ` WHERE ` + s.key + ` = $1`
		if lock {
			sql += ` FOR UPDATE`
		}
		err := q.QueryRow(ctx, sql, s.id).Scan(&r.WorkflowFile, &r.TagPattern, &r.Enabled, &r.Excluded)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return r, fmt.Errorf("read settings of %s: %w", s.name, err)
		}
		return r, nil
	}

	get := &cobra.Command{
		Use:   "get (OWNER/NAME | --installation ID)",
		Short: "Show the settings set at each level and the effective ones",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			pool, err := g.pool(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			s, err := scopeOf(ctx, pool, args)
			if err != nil {
				return err
			}
			own, err := read(ctx, pool, s, false)
			if err != nil {
				return err
			}
			inst := releaseSettingsRow{}
			if s.subject == "repository" {
				var instID int64
				if err := pool.QueryRow(ctx, `SELECT installation_id FROM repositories WHERE id = $1`, s.id).Scan(&instID); err != nil {
					return fmt.Errorf("read repository: %w", err)
				}
				if inst, err = read(ctx, pool, settingsScope{table: "installation_release_settings", key: "installation_id", id: instID,
					name: fmt.Sprintf("installation %d", instID)}, false); err != nil {
					return err
				}
			}
			eff := effectiveSettings(own, inst, defaultWorkflow, defaultPattern)
			return g.render(map[string]any{"scope": s.name, s.subject: own, "installation": inst, "effective": eff}, func(w io.Writer) {
				fmt.Fprintf(w, "SETTING\tEFFECTIVE\tFROM\n")
				for _, f := range eff {
					fmt.Fprintf(w, "%s\t%s\t%s\n", f.Name, f.Value, f.From)
				}
			})
		},
	}

	var wf, tp, reason, operator string
	var enabled bool
	var excluded []string
	set := &cobra.Command{
		Use:   "set (OWNER/NAME | --installation ID) [--workflow-file F] [--tag-pattern P] [--enabled=BOOL] [--exclude P]... --reason TEXT",
		Short: "Set release settings (audited); what is not given stays as it is",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if !fl.Changed("workflow-file") && !fl.Changed("tag-pattern") && !fl.Changed("enabled") && !fl.Changed("exclude") {
				return usageError{errors.New("nothing to set: give --workflow-file, --tag-pattern, --enabled or --exclude")}
			}
			if fl.Changed("workflow-file") && !workflowFilePattern.MatchString(wf) {
				return usageError{fmt.Errorf("--workflow-file %q: want a file name in .github/workflows, e.g. release.yml", wf)}
			}
			if fl.Changed("tag-pattern") {
				if err := validTagPattern("--tag-pattern", tp); err != nil {
					return err
				}
			}
			if len(excluded) > 20 {
				return usageError{fmt.Errorf("--exclude: at most 20 patterns, got %d", len(excluded))}
			}
			for _, x := range excluded {
				if err := validTagPattern("--exclude", x); err != nil {
					return err
				}
			}
			return writeSettings(cmd, g, "release_settings.set", reason, operator, args, scopeOf, read, func(r *releaseSettingsRow) {
				if fl.Changed("workflow-file") {
					r.WorkflowFile = &wf
				}
				if fl.Changed("tag-pattern") {
					r.TagPattern = &tp
				}
				if fl.Changed("enabled") {
					r.Enabled = &enabled
				}
				if fl.Changed("exclude") {
					r.Excluded = excluded
				}
			})
		},
	}
	set.Flags().StringVar(&wf, "workflow-file", "", "release workflow file name")
	set.Flags().StringVar(&tp, "tag-pattern", "", "release tag pattern (path.Match on the tag name)")
	set.Flags().BoolVar(&enabled, "enabled", true, "whether tags start releases")
	set.Flags().StringArrayVar(&excluded, "exclude", nil, "excluded tag pattern (repeat; replaces the list)")

	var unWF, unTP, unEnabled, unExcluded, unAll bool
	unset := &cobra.Command{
		Use:   "unset (OWNER/NAME | --installation ID) (--workflow-file | --tag-pattern | --enabled | --exclude | --all) --reason TEXT",
		Short: "Unset release settings so the next level decides (audited)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !unWF && !unTP && !unEnabled && !unExcluded && !unAll {
				return usageError{errors.New("nothing to unset: give --workflow-file, --tag-pattern, --enabled, --exclude or --all")}
			}
			return writeSettings(cmd, g, "release_settings.unset", reason, operator, args, scopeOf, read, func(r *releaseSettingsRow) {
				if unWF || unAll {
					r.WorkflowFile = nil
				}
				if unTP || unAll {
					r.TagPattern = nil
				}
				if unEnabled || unAll {
					r.Enabled = nil
				}
				if unExcluded || unAll {
					r.Excluded = nil
				}
			})
		},
	}
	unset.Flags().BoolVar(&unWF, "workflow-file", false, "unset the workflow file")
	unset.Flags().BoolVar(&unTP, "tag-pattern", false, "unset the tag pattern")
	unset.Flags().BoolVar(&unEnabled, "enabled", false, "unset enabled")
	unset.Flags().BoolVar(&unExcluded, "exclude", false, "unset the excluded tag patterns")
	unset.Flags().BoolVar(&unAll, "all", false, "unset everything (remove the row)")

	for _, c := range []*cobra.Command{get, set, unset} {
		c.Flags().Int64Var(&installation, "installation", 0, "an installation's defaults instead of a repository")
	}
	get.Flags().StringVar(&defaultWorkflow, "default-workflow-file", envOr(g.getenv, "BOARDREADYOPS_RELEASE_WORKFLOW", "boardreadyops-release.yml"), "the deployment's default (lifecycle's)")
	get.Flags().StringVar(&defaultPattern, "default-tag-pattern", envOr(g.getenv, "BOARDREADYOPS_RELEASE_TAG_PATTERN", "v*"), "the deployment's default (lifecycle's)")
	for _, c := range []*cobra.Command{set, unset} {
		c.Flags().StringVar(&reason, "reason", "", "why (audited)")
		g.operatorFlag(c, &operator)
	}
	settings.AddCommand(get, set, unset)
	cmd.AddCommand(settings)
	return cmd
}

type rowReader = func(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, args []string) (settingsScope, error)

type settingsReader = func(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, s settingsScope, lock bool) (releaseSettingsRow, error)

// writeSettings applies change to the scope's row and audits old and new values, in one
// transaction.
func writeSettings(cmd *cobra.Command, g *globals, action, reason, operator string, args []string, scopeOf rowReader, read settingsReader,
	change func(*releaseSettingsRow)) error {
	if err := requireAudited(reason, operator, "say why the settings change"); err != nil {
		return err
	}
	ctx := cmd.Context()
	pool, err := g.pool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	var s settingsScope
	var before, after releaseSettingsRow
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if s, err = scopeOf(ctx, tx, args); err != nil {
			return err
		}
		if before, err = read(ctx, tx, s, true); err != nil {
			return err
		}
		after = before
		change(&after)
		if after.empty() {
			_, err = tx.Exec(ctx, `DELETE FROM `+s.table+` WHERE `+s.key+` = $1`, s.id)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO `+s.table+` (`+s.key+`, workflow_file, tag_pattern, enabled, excluded_tag_patterns, updated_at)
				VALUES ($1, $2, $3, $4, $5, now())
				ON CONFLICT (`+s.key+`) DO UPDATE SET workflow_file = EXCLUDED.workflow_file, tag_pattern = EXCLUDED.tag_pattern,
					enabled = EXCLUDED.enabled, excluded_tag_patterns = EXCLUDED.excluded_tag_patterns, updated_at = now()`,
				s.id, after.WorkflowFile, after.TagPattern, after.Enabled, after.Excluded)
		}
		if err != nil {
			return fmt.Errorf("write settings of %s: %w", s.name, err)
		}
		evidence, _ := json.Marshal(map[string]any{"before": before, "after": after})
		if _, err := tx.Exec(ctx, `INSERT INTO control_plane_audit (operator, action, subject_type, subject_id, reason, evidence, from_status, to_status)
			VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)`, operator, action, s.subject, s.id, reason, string(evidence),
			map[bool]string{true: "default", false: "set"}[before.empty()], map[bool]string{true: "default", false: "set"}[after.empty()]); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return g.render(map[string]any{"scope": s.name, "before": before, "after": after}, func(w io.Writer) {
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(after)
		fmt.Fprintf(w, "release settings of %s: %s -> %s (applies to the next push)\n", s.name, b, a)
	})
}

// settingField is one effective setting with the level it comes from.
type settingField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	From  string `json:"from"`
}

func effectiveSettings(own, inst releaseSettingsRow, defaultWorkflow, defaultPattern string) []settingField {
	pick := func(name string, own, inst *string, def string) settingField {
		switch {
		case own != nil:
			return settingField{name, *own, "this level"}
		case inst != nil:
			return settingField{name, *inst, "installation"}
		}
		return settingField{name, def, "default"}
	}
	str := func(b *bool) *string {
		if b == nil {
			return nil
		}
		s := fmt.Sprint(*b)
		return &s
	}
	list := func(l []string) *string {
		if l == nil {
			return nil
		}
		s := strings.Join(l, ",")
		return &s
	}
	return []settingField{
		pick("workflow_file", own.WorkflowFile, inst.WorkflowFile, defaultWorkflow),
		pick("tag_pattern", own.TagPattern, inst.TagPattern, defaultPattern),
		pick("excluded_tag_patterns", list(own.Excluded), list(inst.Excluded), ""),
		pick("enabled", str(own.Enabled), str(inst.Enabled), "true"),
	}
}
