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
	// oneMore reads one row past the limit, so that a list can say more rows match (moreNote).
	oneMore bool
}

// query builds the statement with only the conditions asked for, and the status written into it
// as a literal from the table's closed set of states (for every status, one such statement per
// status, united). A queue's statuses are found through partial indexes
// (control_plane_outbox_attention_idx for dead letters and reconciliations,
// control_plane_jobs_dead_letter_idx, the claim, lease and completed indexes), and a partial
// index's predicate cannot be proved from a parameter: a condition that an empty parameter makes
// true ("status = $1 OR $1 is empty"), or "status = $1" alone, has a generic plan that reads the
// whole table and sorts it. brops runs one command per connection, but behind a pooler that
// keeps prepared statements (PgBouncer's max_prepared_statements, docs/operations.md "Connection
// poolers") every client of a server connection shares one statement and its plan cache, and
// after five executions PostgreSQL may settle on that generic plan.
func (q queueList) query() (string, []any, error) {
	if q.limit < 1 || q.limit > 1000 {
		return "", nil, usageError{fmt.Errorf("--limit %d: want 1 to 1000", q.limit)}
	}
	if q.status != "" && !slices.Contains(q.statuses, q.status) {
		return "", nil, usageError{fmt.Errorf("--status %q: want one of %s", q.status, strings.Join(q.statuses, ", "))}
	}
	if q.oneMore {
		q.limit++
	}
	var args []any
	typeFilter := ""
	if q.effectType != "" {
		args = append(args, q.effectType)
		typeFilter = " AND effect_type = $1"
	}
	if q.status != "" {
		sql, err := q.newestOf(q.status, typeFilter)
		return sql, args, err
	}
	// Every status: this reads the backlog and the leases (few, unless something is wrong) and at
	// most the limit of each other status.
	parts := make([]string, 0, len(q.statuses))
	for _, status := range q.statuses {
		part, err := q.newestOf(status, typeFilter)
		if err != nil {
			return "", nil, err
		}
		parts = append(parts, "("+part+")")
	}
	return newestOfAll(parts, "updated_at DESC, id DESC", q.limit), args, nil
}

// newestOfAll unites parts, each the newest rows of one status read through that status's index
// in the order given, and keeps the newest limit of them: the rows one ORDER BY over the whole
// table returns, without reading and sorting every row retention keeps (no index holds that
// order across statuses).
func newestOfAll(parts []string, order string, limit int) string {
	return fmt.Sprintf("SELECT * FROM (%s) newest ORDER BY %s LIMIT %d", strings.Join(parts, " UNION ALL "), order, limit)
}

// newestOf is the statement for the newest rows in one status, with the status written in as a
// literal, and filter (" AND …" or "") added to its condition.
func (q queueList) newestOf(status, filter string) (string, error) {
	// A member of the closed set the caller checked; and, whatever a caller passes as that set,
	// only lower-case letters and underscores become a literal.
	if !statusWord.MatchString(status) {
		return "", fmt.Errorf("status %q: not a status word", status)
	}
	// Newest first. A completed row's completed_at is its updated_at (every completion sets both,
	// and nothing changes a completed row's updated_at while it stays completed), and only
	// completed_at has an index over completed rows (retention's), which a week of them and more
	// needs: the outbox's, ordered by updated_at, were read whole and sorted. The limit, checked
	// by the caller, is written in too: a generic plan takes a parameter's limit for a tenth of
	// the rows, and for the most common status a tenth reads better by a sort than by the index.
	order := "updated_at"
	if status == outbox.StatusCompleted || status == jobs.StatusCompleted {
		order = "completed_at"
	}
	return fmt.Sprintf("SELECT %s FROM %s WHERE status = '%s'%s ORDER BY %s DESC, id DESC LIMIT %d",
		q.columns, q.table, status, filter, order, q.limit), nil
}
