// Package store writes accepted deliveries: the inbox row and its job in one statement through
// boardreadyops_accept_webhook, the only database privilege the ingest role has.
package store

import (
	"context"
	"fmt"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// Store implements webhook.Store on a pool.
type Store struct {
	DB database.DBTX
}

// Accept stores d. A known delivery id stores nothing and reports a duplicate.
func (s *Store) Accept(ctx context.Context, d webhook.Delivery, traceparent string) (webhook.Outcome, error) {
	var out webhook.Outcome
	var jobID *int64
	err := s.DB.QueryRow(ctx, `SELECT inbox_id, job_id, duplicate FROM boardreadyops_accept_webhook($1, $2, $3, $4, $5, $6, $7, $8)`,
		d.ID, d.Event, nullString(d.Action), nullInt(d.InstallationID), nullInt(d.RepositoryID), d.Document,
		d.PayloadSHA256[:], nullString(traceparent)).Scan(&out.InboxID, &jobID, &out.Duplicate)
	if err != nil {
		return webhook.Outcome{}, fmt.Errorf("accept delivery %s: %w", d.ID, err)
	}
	if jobID != nil {
		out.JobID = *jobID
	}
	return out, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}
