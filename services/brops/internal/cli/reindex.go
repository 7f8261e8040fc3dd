package cli

import (
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/boardreadyops/cloud/pkg/retention"
)

// reindexed is one claim or lease index brops retention reindex looked at.
type reindexed struct {
	retention.IndexBloat
	BloatRatio float64 `json:"bloat_ratio"`
	Rebuilt    bool    `json:"rebuilt"`
	SizeAfter  *int64  `json:"size_after_bytes,omitempty"`
}

func newReindexCmd(g *globals) *cobra.Command {
	var dryRun bool
	var minRatio float64
	var minMiB int64
	cmd := &cobra.Command{
		Use:   "reindex [--dry-run]",
		Short: "Rebuild (REINDEX CONCURRENTLY) the partial claim and lease indexes that are bloated",
		Long: `The claim and lease indexes (…_claim_idx, …_lease_idx on control_plane_jobs and
control_plane_outbox) index only rows in one state, so every claim and completion moves an entry
out of them; VACUUM removes dead entries but gives a page back only when it is empty, and the
index grows sparse. This compares each index's size with what its live entries need
(boardreadyops_retention_index_bloat: pg_class.reltuples after VACUUM or ANALYZE) and rebuilds
those at least --min-ratio times too large and at least --min-size-mib MiB with REINDEX INDEX
CONCURRENTLY (no lock that stops claims; it waits for running transactions). It needs the owner
of the tables: run it with the migration URL (database.keys.migrate), not a service login.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if minRatio < 1 || minMiB < 0 {
				return usageError{fmt.Errorf("--min-ratio %v, --min-size-mib %d: want a ratio ≥ 1 and a size ≥ 0", minRatio, minMiB)}
			}
			pool, err := g.pool(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			store := &retention.Store{}
			bloat, err := store.IndexBloat(cmd.Context(), pool)
			if err != nil {
				return err
			}
			out := make([]reindexed, 0, len(bloat))
			for _, b := range bloat {
				r := reindexed{IndexBloat: b, BloatRatio: b.Ratio()}
				if !dryRun && b.Bloated(minRatio, minMiB<<20) {
					if _, err := pool.Exec(cmd.Context(), `REINDEX INDEX CONCURRENTLY public.`+pgx.Identifier{b.Index}.Sanitize()); err != nil {
						return fmt.Errorf("reindex %s: %w", b.Index, err)
					}
					var size int64
					if err := pool.QueryRow(cmd.Context(), `SELECT pg_relation_size(('public.' || quote_ident($1))::regclass)`, b.Index).Scan(&size); err != nil {
						return fmt.Errorf("size of %s: %w", b.Index, err)
					}
					r.Rebuilt, r.SizeAfter = true, &size
				}
				out = append(out, r)
			}
			return g.render(out, func(w io.Writer) {
				fmt.Fprintln(w, "INDEX\tSIZE\tLIVE ENTRIES\tNEEDED\tRATIO\tREBUILT\tSIZE AFTER")
				for _, r := range out {
					live, needed, after := "-", "-", "-"
					if r.LiveEntries != nil {
						live = fmt.Sprint(*r.LiveEntries)
					}
					if r.NeededBytes != nil {
						needed = fmt.Sprint(*r.NeededBytes)
					}
					if r.SizeAfter != nil {
						after = fmt.Sprint(*r.SizeAfter)
					}
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%.1f\t%v\t%s\n", r.Index, r.SizeBytes, live, needed, r.BloatRatio, r.Rebuilt, after)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the estimate, rebuild nothing")
	cmd.Flags().Float64Var(&minRatio, "min-ratio", 4, "rebuild an index at least this many times the size its live entries need")
	cmd.Flags().Int64Var(&minMiB, "min-size-mib", 8, "and at least this large (MiB): a small index is cheap to scan whatever its ratio")
	return cmd
}
