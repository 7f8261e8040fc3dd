package cli

import (
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/outbox"
)

// The replay's result line says what the database did, not what a replay usually does.
func TestReplayOutcome(t *testing.T) {
	t.Parallel()
	newer := int64(42)
	tests := []struct {
		name       string
		effect     outbox.Effect
		wantStatus string
		wantDetail string
	}{
		{"back in the queue", outbox.Effect{ID: 7, Status: outbox.StatusAvailable}, "available", ""},
		{"older check-run update", outbox.Effect{ID: 7, Status: outbox.StatusCompleted, SupersededBy: &newer}, "superseded", "newer check-run update 42"},
		{"held by a restore fence", outbox.Effect{ID: 7, Status: outbox.StatusReconciliationRequired}, "reconciliation_required", "brops reconcile inspect 7"},
	}
	for _, tt := range tests {
		status, detail := replayOutcome(tt.effect)
		if status != tt.wantStatus || !strings.Contains(detail, tt.wantDetail) || (tt.wantDetail == "") != (detail == "") {
			t.Errorf("%s: %q %q, want %q and a detail with %q", tt.name, status, detail, tt.wantStatus, tt.wantDetail)
		}
	}
}
