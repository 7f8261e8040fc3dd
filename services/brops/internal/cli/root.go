// Package cli implements brops, the operator's command line: migrations now, and inspection,
// replay and reconciliation as they land. Every command takes --database-url (env DATABASE_URL)
// and --output table|json.
package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/config"
)

// globals are the settings every command shares.
type globals struct {
	databaseURL string
	output      string
	stdin       io.Reader
	stdout      io.Writer
	stderr      io.Writer
	getenv      config.Getenv
}

// Execute runs brops with args and returns the process exit code: 0 success, 1 failure, 2 usage.
func Execute(ctx context.Context, args []string, getenv config.Getenv, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := newRoot(g, getenv)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "brops: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks errors the user fixes by changing the command line.
type usageError struct{ error }

func newRoot(g *globals, getenv config.Getenv) *cobra.Command {
	root := &cobra.Command{
		Use:           "brops",
		Short:         "Operate BoardReadyOps Cloud: migrations, inspection, replay, reconciliation",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if g.output != "table" && g.output != "json" {
				return usageError{fmt.Errorf("--output %q: want table or json", g.output)}
			}
			if !cmd.Flags().Changed("database-url") {
				g.databaseURL = getenv("DATABASE_URL")
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// No default from DATABASE_URL: help prints defaults, and the URL carries the password. The
	// variable is read before the command runs, when the flag is not given (given, even empty,
	// it wins).
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", "", "PostgreSQL connection URL (env DATABASE_URL)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	root.AddCommand(newMigrateCmd(g), newOutboxCmd(g), newJobsCmd(g), newRunsCmd(g), newStatsCmd(g), newReconcileCmd(g), newWebhooksCmd(g), newRestoreCmd(g), newRetentionCmd(g), newDispatchCmd(g), newReposCmd(g))
	return root
}

func (g *globals) requireDatabase() error {
	if g.databaseURL == "" {
		return usageError{errors.New("no database: set DATABASE_URL or pass --database-url")}
	}
	return nil
}

// render prints v as indented JSON, or calls table with a tab-aligned writer.
func (g *globals) render(v any, table func(w io.Writer)) error {
	if g.output == "json" {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// moreNote says that a list stopped at its limit of shown rows with more matching, and how to see
// them: the caller prints it above its table, and with -o json it goes to stderr, so that
// stdout keeps the list's shape.
func (g *globals) moreNote(shown int, how string) string {
	note := fmt.Sprintf("the newest %d shown; more match: %s", shown, how)
	if g.output == "json" {
		fmt.Fprintf(g.stderr, "brops: %s\n", note)
	}
	return note
}

// confirm asks question on stderr and reports whether the answer read from stdin is y.
func (g *globals) confirm(question string) bool {
	fmt.Fprint(g.stderr, question)
	answer, _ := bufio.NewReader(g.stdin).ReadString('\n')
	return strings.ToLower(strings.TrimSpace(answer)) == "y"
}
