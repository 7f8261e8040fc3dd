package cli

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/releasetag"
)

// commitPattern is a commit SHA as release_runs keeps it: SHA-1 or SHA-256, lowercase hex.
var commitPattern = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// tagRefusal says why tag starts no release, as lifecycle decides it for a tag push
// (pkg/releasetag): "" when it does. An invalid pattern starts no release there either.
func tagRefusal(pattern string, excluded []string, tag string) string {
	refusal, err := releasetag.Check(pattern, excluded, tag)
	if err != nil {
		return "the " + err.Error() + ": no tag starts a release"
	}
	return refusal
}

// runCreated is what release-runs create prints.
type runCreated struct {
	ReleaseRun     string  `json:"release_run"`
	Created        bool    `json:"created"`
	Repository     string  `json:"repository"`
	Tag            string  `json:"tag"`
	HeadSHA        string  `json:"head_sha"`
	WorkflowFile   string  `json:"workflow_file"`
	DispatchPaused *string `json:"dispatch_paused,omitempty"`
	Show           string  `json:"show"`
}

func newRunCreateCmd(g *globals) *cobra.Command {
	var repo, tag, commit, reason, operator, checkRunName, defaultWorkflow, defaultPattern string
	cmd := &cobra.Command{
		Use:   "create --repo OWNER/NAME --tag TAG --commit SHA --reason TEXT",
		Short: "Start the release run of a tag whose push started none, under the push's rules (audited)",
		Long: `Starts a release run as a push of the tag would: the run (check_pending), attempt 1 and its
check run's creation, which the dispatchers send; the release workflow is dispatched once the check
run exists. For a tag GitHub sent no push event for — none is sent for tags when more than three
are pushed at once (git push --tags) — or whose push delivery was lost for good.

--commit is the tagged commit:

  git rev-parse TAG^{commit}

For an annotated tag (git tag -a) this is not the tag object's SHA (git rev-parse TAG): the check
run goes on the commit. 40 or 64 lowercase hexadecimal digits.

The push's rules apply, and a refusal names the one that refused: the repository installed (not
removed), its installation active (not uninstalled, not suspended), the repository not archived,
releases enabled, the tag matching the effective tag pattern and none of its excluded patterns
(brops repos settings get). The workflow file is the repository's setting, else its
installation's, else the deployment's default; the deployment's defaults are read as lifecycle
reads them (BOARDREADYOPS_RELEASE_WORKFLOW, BOARDREADYOPS_RELEASE_TAG_PATTERN): run brops with
lifecycle's values, or pass --default-workflow-file and --default-tag-pattern.
Under a dispatch pause the run is created and its check run says it waits. The same tag at the
same commit creates nothing: the command names the run it already has. One audit row
(release_run.start) for a run created.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireAudited(reason, operator, "say why the release is started by hand (e.g. tags pushed together)"); err != nil {
				return err
			}
			tag = strings.TrimPrefix(tag, "refs/tags/")
			switch {
			case strings.Count(repo, "/") != 1:
				return usageError{fmt.Errorf("--repo %q: want OWNER/NAME", repo)}
			case tag == "":
				return usageError{errors.New("--tag is required: the tag's name, e.g. v1.4.2")}
			case !commitPattern.MatchString(commit):
				return usageError{fmt.Errorf("--commit %q: want the tagged commit's SHA, 40 or 64 lowercase hexadecimal digits: git rev-parse %s^{commit} (for an annotated tag not the tag object's SHA)", commit, tag)}
			case !workflowFilePattern.MatchString(defaultWorkflow):
				return usageError{fmt.Errorf("--default-workflow-file %q: want a file name in .github/workflows, e.g. release.yml", defaultWorkflow)}
			}
			if err := validTagPattern("--default-tag-pattern", defaultPattern); err != nil {
				return err
			}
			ctx := cmd.Context()
			pool, err := g.pool(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			out := runCreated{Repository: repo, Tag: tag, HeadSHA: commit}
			// One transaction: the tag pattern is decided on the settings the function then sees
			// beside it, as lifecycle decides a push before its call.
			err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				var repositoryID *int64
				var pattern *string
				var excluded []string
				err := tx.QueryRow(ctx, `SELECT r.id, coalesce(s.tag_pattern, d.tag_pattern), coalesce(s.excluded_tag_patterns, d.excluded_tag_patterns)
					FROM repositories r
					LEFT JOIN repository_release_settings s ON s.repository_id = r.id
					LEFT JOIN installation_release_settings d ON d.installation_id = r.installation_id
					WHERE r.id = `+repositoryNamed("$1"), repo).Scan(&repositoryID, &pattern, &excluded)
				if errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("repository %s is not recorded (BoardReadyOps learns repositories from the App's installation events and pushes)", repo)
				}
				if err != nil {
					return fmt.Errorf("read repository %s: %w", repo, err)
				}
				effective := defaultPattern
				if pattern != nil {
					effective = *pattern
				}
				var refusal *string
				if why := tagRefusal(effective, excluded, tag); why != "" {
					refusal = &why
				}
				err = tx.QueryRow(ctx, `SELECT release_run_id::text, created, workflow_file, dispatch_paused
					FROM boardreadyops_release_run_start($1, $2, $3, $4, $5, $6, $7, $8)`,
					*repositoryID, tag, commit, operator, reason, defaultWorkflow, checkRunName, refusal).
					Scan(&out.ReleaseRun, &out.Created, &out.WorkflowFile, &out.DispatchPaused)
				return startRefused(repo, tag, err)
			})
			if err != nil {
				return err
			}
			out.Show = "brops release-runs show " + out.ReleaseRun
			return g.render(out, func(w io.Writer) {
				if !out.Created {
					fmt.Fprintf(w, "%s tag %s at %s already has its run %s: nothing created\n", repo, tag, commit, out.ReleaseRun)
				} else {
					fmt.Fprintf(w, "release run %s created for %s tag %s at %s (workflow %s): the dispatchers create its check run, then dispatch the workflow\n",
						out.ReleaseRun, repo, tag, commit, out.WorkflowFile)
					if out.DispatchPaused != nil {
						fmt.Fprintf(w, "dispatches are paused (%s): the workflow starts when they resume (brops dispatch resume)\n", *out.DispatchPaused)
					}
				}
				fmt.Fprintf(w, "  %s\n", out.Show)
			})
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "repository OWNER/NAME")
	cmd.Flags().StringVar(&tag, "tag", "", "the tag's name, e.g. v1.4.2")
	cmd.Flags().StringVar(&commit, "commit", "", "the tagged commit: git rev-parse TAG^{commit} (for an annotated tag not the tag object's SHA)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (audited)")
	cmd.Flags().StringVar(&checkRunName, "check-run-name", envOr(g.getenv, "BOARDREADYOPS_CHECK_RUN_NAME", "BoardReadyOps release"), "the check run's name (as lifecycle's)")
	cmd.Flags().StringVar(&defaultWorkflow, "default-workflow-file", envOr(g.getenv, "BOARDREADYOPS_RELEASE_WORKFLOW", "boardreadyops-release.yml"), "the deployment's default workflow file (lifecycle's BOARDREADYOPS_RELEASE_WORKFLOW)")
	cmd.Flags().StringVar(&defaultPattern, "default-tag-pattern", envOr(g.getenv, "BOARDREADYOPS_RELEASE_TAG_PATTERN", "v*"), "the deployment's default tag pattern (lifecycle's BOARDREADYOPS_RELEASE_TAG_PATTERN)")
	g.operatorFlag(cmd, &operator)
	return cmd
}

// startRefused turns boardreadyops_release_run_start's refusals into brops errors that name the
// rule: a malformed argument is a usage error (exit 2), a rule that refused an error (exit 1),
// with the database's hint.
func startRefused(repo, tag string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		if err != nil {
			return fmt.Errorf("start the release run of %s tag %s: %w", repo, tag, err)
		}
		return nil
	}
	msg := "no release run started: " + pgErr.Message
	if pgErr.Hint != "" {
		msg += " (" + pgErr.Hint + ")"
	}
	switch pgErr.Code {
	case "22023":
		return usageError{errors.New(msg)}
	case "BR003", "BR006":
		return errors.New(msg)
	}
	return fmt.Errorf("start the release run of %s tag %s: %w", repo, tag, err)
}
