// Package store writes accepted deliveries: the inbox row and its job in one statement through
// boardreadyops_accept_webhook, the only database privilege the ingest role has.
package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// acceptSQL stores one delivery (inbox row + job) or reports it as a duplicate.
const acceptSQL = `SELECT inbox_id, job_id, duplicate FROM boardreadyops_accept_webhook($1, $2, $3, $4, $5, $6, $7, $8)`

// Store implements webhook.Store.
type Store struct {
	// DB runs each delivery in its own transaction when Group is nil.
	DB database.DBTX
	// Group, when set, commits concurrent deliveries together (one commit, one WAL flush for
	// many 202s). A delivery is still answered only after its own row committed; when the
	// request's deadline passes first it is answered 503 and may still commit, which is safe:
	// GitHub's retry carries the same delivery id and is deduplicated.
	Group *groupcommit.Committer
}

// Accept stores d. A known delivery id stores nothing and reports a duplicate.
func (s *Store) Accept(ctx context.Context, d webhook.Delivery, traceparent string) (webhook.Outcome, error) {
	args := []any{d.ID, d.Event, nullString(d.Action), nullInt(d.InstallationID), nullInt(d.RepositoryID), d.Document,
		d.PayloadSHA256[:], nullString(traceparent)}
	if s.Group == nil {
		out, err := scanOutcome(s.DB.QueryRow(ctx, acceptSQL, args...))
		if err != nil {
			return webhook.Outcome{}, fmt.Errorf("accept delivery %s: %w", d.ID, err)
		}
		return out, nil
	}
	// The batch runs outside the request's context, so its query spans are not in the request's
	// trace: this span, named as the query tracer names the statement, stands for it there.
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/boardreadyops/cloud/services/ingest/internal/store").
		Start(ctx, "db boardreadyops_accept_webhook", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.Bool("boardreadyops.group_commit", true)))
	defer span.End()
	// The callback may run after an abandoned caller returned; it writes only to res, which the
	// caller reads only when DoOrAbandon reported the outcome.
	res := new(webhook.Outcome)
	err := s.Group.DoOrAbandon(ctx, func(b *groupcommit.Batch, report func(error)) {
		b.Queue(acceptSQL, args...).QueryRow(func(row pgx.Row) error {
			out, err := scanOutcome(row)
			*res = out
			report(err)
			return err
		})
	})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return webhook.Outcome{}, fmt.Errorf("accept delivery %s: %w", d.ID, err)
	}
	return *res, nil
}

func scanOutcome(row pgx.Row) (webhook.Outcome, error) {
	var out webhook.Outcome
	var jobID *int64
	if err := row.Scan(&out.InboxID, &jobID, &out.Duplicate); err != nil {
		return webhook.Outcome{}, err
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
