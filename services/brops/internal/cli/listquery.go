package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/boardreadyops/cloud/pkg/jobs"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

// statusWord is the form of every queue status: what may be written into a statement as one.
var statusWord = regexp.MustCompile(`^[a-z_]+$`)

// queueList selects the newest rows of a queue table (control_plane_outbox, control_plane_jobs)
// for outbox list, reconcile list and jobs list.
type queueList struct {
	table    string   // the table
	columns  string   // its select list
	statuses []string // every status its row rule allows
	status   string   // only this status; "" for all
	// effectType, when not "", keeps only that effect type (the outbox).
	effectType string
	limit      int
}

// query builds the statement with only the conditions asked for, and the status written into it
// as a literal from the table's closed set of states. A queue's statuses are found through
// partial indexes (control_plane_outbox_attention_idx for dead letters and reconciliations,
// control_plane_jobs_dead_letter_idx, the claim, lease and completed indexes), and a partial index's
// predicate cannot be proved from a parameter: a condition that an empty parameter makes true
// ("status = $1 OR $1 is empty"), or "status = $1" alone, has a generic plan that reads the
// whole table and sorts it. brops runs one command per connection, but behind a pooler that
// keeps prepared statements (PgBouncer's max_prepared_statements, docs/operations.md "Connection
// poolers") every client of a server connection shares one statement and its plan cache, and
// after five executions PostgreSQL may settle on that generic plan.
func (q queueList) query() (string, []any, error) {
	if q.limit < 1 || q.limit > 1000 {
		return "", nil, usageError{fmt.Errorf("--limit %d: want 1 to 1000", q.limit)}
	}
	var where []string
	var args []any
	if q.status != "" {
		if !slices.Contains(q.statuses, q.status) {
			return "", nil, usageError{fmt.Errorf("--status %q: want one of %s", q.status, strings.Join(q.statuses, ", "))}
		}
		// A member of the closed set above; and, whatever a caller passes as that set, only
		// lower-case letters and underscores become a literal.
		if !statusWord.MatchString(q.status) {
			return "", nil, fmt.Errorf("status %q: not a status word", q.status)
		}
		where = append(where, "status = '"+q.status+"'")
	}
	if q.effectType != "" {
		args = append(args, q.effectType)
		where = append(where, fmt.Sprintf("effect_type = $%d", len(args)))
	}
	sql := "SELECT " + q.columns + " FROM " + q.table
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	// Newest first. A completed row's completed_at is its updated_at (every completion sets both,
	// and nothing changes a completed row's updated_at while it stays completed), and only
	// completed_at has an index over completed rows (retention's), which a week of them and more
	// needs: the outbox's, ordered by updated_at, were read whole and sorted. The limit, checked
	// above, is written in too: a generic plan takes a parameter's limit for a tenth of the rows,
	// and for the most common status a tenth reads better by a sort than by the index.
	order := "updated_at"
	if q.status == outbox.StatusCompleted || q.status == jobs.StatusCompleted {
		order = "completed_at"
	}
	return sql + fmt.Sprintf(" ORDER BY %s DESC, id DESC LIMIT %d", order, q.limit), args, nil
}
