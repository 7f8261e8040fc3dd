package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQueueListsByStatus runs outbox list and jobs list through the command line: a status finds
// its rows, and a status outside the table's states is a usage error (exit 2) naming them, never
// a statement.
func TestQueueListsByStatus(t *testing.T) {
	t.Parallel()
	o := newOps(t)
	o.enqueueDispatch()
	deadID, _, _ := o.dispatch("dead_letter")
	code, out, errOut := run(t, o.env, "outbox", "list", "--status", "dead_letter", "-o", "json")
	var effects []struct {
		ID     int64
		Status string
	}
	if code != 0 || json.Unmarshal([]byte(out), &effects) != nil || len(effects) != 1 || effects[0].ID != deadID {
		t.Fatalf("outbox list --status dead_letter: %d %s %s, want effect %d alone", code, out, errOut, deadID)
	}
	if code, out, errOut := run(t, o.env, "jobs", "list", "--status", "completed"); code != 0 || !strings.HasPrefix(out, "ID") {
		t.Fatalf("jobs list --status completed: %d %s %s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"outbox", "list", "--status", "bogus"},
		{"outbox", "list", "--status", "dead_letter' OR true --"},
		{"jobs", "list", "--status", "leased'"},
		{"jobs", "list", "--status", "reconciliation_required"},
	} {
		code, _, errOut := run(t, o.env, args...)
		if code != 2 || (args[2] == "--status" && !strings.Contains(errOut, "dead_letter")) {
			t.Errorf("%v: exit %d, %q; want 2 and the statuses named", args, code, errOut)
		}
	}
}
