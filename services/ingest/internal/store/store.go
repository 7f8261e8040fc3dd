// Package store writes accepted deliveries: the inbox row and its job in one statement through
// boardreadyops_webhook_accept, and the body digest of ignored ones through
// boardreadyops_webhook_record_ignored — the only database privileges the ingest role has.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/boardreadyops/cloud/pkg/database"
	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// acceptSQL stores one delivery (inbox row + job) or reports it as a duplicate (a known delivery
// id) or a replay (a known body under another delivery id).
const acceptSQL = `SELECT inbox_id, job_id, duplicate, replayed FROM boardreadyops_webhook_accept($1, $2, $3, $4, $5, $6, $7, $8)`

// ignoreSQL records the body digest of an ignored delivery; true when the body is a replay.
const ignoreSQL = `SELECT boardreadyops_webhook_record_ignored($1, $2)`

// Store implements webhook.Store.
type Store struct {
	// DB runs each delivery in its own transaction when Group is nil.
	DB database.DBTX
	// Group, when set, commits concurrent deliveries together (one commit, one WAL flush for
	// many 202s). A delivery is still answered only after its own row committed; when the
	// request's deadline passes first it is answered 503 and may still commit, which is safe:
	// GitHub's retry carries the same delivery id and is deduplicated.
	Group *groupcommit.Committer
	// Reset, when set, drops the pool's connections (pgxpool.Pool.Reset) once a write lost its
	// connection: when the server went away, every other connection to it is dead as well, and
	// the write again must not draw another of them.
	Reset func()
}

// connectionTries bounds how often one delivery is written when the connection it used was lost.
const connectionTries = 3

// Accept stores d. A known delivery id stores nothing and reports a duplicate.
//
// A write that failed because its connection was lost is written again on another connection
// (while the request's deadline allows), not answered 503: after a failover the pool still holds
// connections to the old primary, each of which fails on its first use, and GitHub never
// redelivers a failed delivery by itself (nor does it retry a failed redelivery). Writing again is
// safe even when the lost connection had committed: the delivery id is then known and the second
// write reports a duplicate.
func (s *Store) Accept(ctx context.Context, d webhook.Delivery, traceparent string) (webhook.Outcome, error) {
	out, err := s.retryLostConnection(ctx, func() (webhook.Outcome, error) { return s.accept(ctx, d, traceparent) })
	return out, unstorable(err)
}

// unstorable marks err webhook.ErrUnstorable when the database refused the row itself: a check
// violation (23514: the inbox's bounds on the document) or a data exception (class 22), which
// writing it again cannot change.
func unstorable(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23514" || strings.HasPrefix(pgErr.Code, "22")) {
		return fmt.Errorf("%w (SQLSTATE %s, %s): %w", webhook.ErrUnstorable, pgErr.Code, pgErr.ConstraintName, err)
	}
	return err
}

// retryLostConnection runs write again while it fails with a lost connection, at most
// connectionTries times in all, resetting the pool before each new try.
func (s *Store) retryLostConnection(ctx context.Context, write func() (webhook.Outcome, error)) (webhook.Outcome, error) {
	for try := 1; ; try++ {
		out, err := write()
		if err == nil || try == connectionTries || ctx.Err() != nil || !database.ConnectionLost(err) {
			return out, err
		}
		if s.Reset != nil {
			s.Reset()
		}
	}
}

func (s *Store) accept(ctx context.Context, d webhook.Delivery, traceparent string) (webhook.Outcome, error) {
	if s.Group == nil {
		out, err := scanOutcome(s.DB.QueryRow(ctx, acceptSQL, acceptArgs(d, traceparent)...))
		if err != nil {
			return webhook.Outcome{}, fmt.Errorf("accept delivery %s: %w", d.ID, err)
		}
		return out, nil
	}
	// The batch runs outside the request's context, so its query spans are not in the request's
	// trace: this span, named as the query tracer names the statement, stands for it there.
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/boardreadyops/cloud/services/ingest/internal/store").
		Start(ctx, "db boardreadyops_webhook_accept", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.Bool("boardreadyops.group_commit", true)))
	defer span.End()
	// The callback may run after an abandoned caller returned; it writes only to res, which the
	// caller reads only when DoOrAbandon reported the outcome.
	res := new(webhook.Outcome)
	err := s.Group.DoOrAbandon(ctx, queueAccept(d, traceparent, res))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return webhook.Outcome{}, fmt.Errorf("accept delivery %s: %w", d.ID, err)
	}
	return *res, nil
}

// Ignore records the body of an ignored (not stored) delivery, so that it cannot be replayed
// under another delivery id either. The outcome is Replayed or nothing. A lost connection is
// retried as in Accept (the same delivery id again is not a replay).
func (s *Store) Ignore(ctx context.Context, d webhook.Delivery) (webhook.Outcome, error) {
	return s.retryLostConnection(ctx, func() (webhook.Outcome, error) { return s.ignore(ctx, d) })
}

func (s *Store) ignore(ctx context.Context, d webhook.Delivery) (webhook.Outcome, error) {
	var out webhook.Outcome
	if s.Group == nil {
		if err := s.DB.QueryRow(ctx, ignoreSQL, d.ID, d.PayloadSHA256[:]).Scan(&out.Replayed); err != nil {
			return webhook.Outcome{}, fmt.Errorf("record ignored delivery %s: %w", d.ID, err)
		}
		out.Duplicate = out.Replayed
		return out, nil
	}
	res := new(webhook.Outcome)
	err := s.Group.DoOrAbandon(ctx, func(b *groupcommit.Batch, report func(error)) {
		b.Queue(ignoreSQL, d.ID, d.PayloadSHA256[:]).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&res.Replayed)
			res.Duplicate = res.Replayed
			report(err)
			return err
		})
	})
	if err != nil {
		return webhook.Outcome{}, fmt.Errorf("record ignored delivery %s: %w", d.ID, err)
	}
	return *res, nil
}

// acceptArgs are acceptSQL's arguments for d. The jsonb document goes as a string: in the query
// modes that never describe a statement (exec, simple_protocol — what a transaction-pooling
// PgBouncer before 1.21 needs) pgx types a parameter by its Go type, and a []byte is bytea, whose
// text form ('\x7b…') is not JSON (SQLSTATE 22P02).
func acceptArgs(d webhook.Delivery, traceparent string) []any {
	return []any{d.ID, d.Event, nullString(d.Action), nullInt(d.InstallationID), nullInt(d.RepositoryID), string(d.Document),
		d.PayloadSHA256[:], nullString(traceparent)}
}

// queueAccept is one delivery's request to the group committer: it joins the batch's acceptSet,
// or, alone, runs acceptSQL.
func queueAccept(d webhook.Delivery, traceparent string, res *webhook.Outcome) func(b *groupcommit.Batch, report func(error)) {
	return func(b *groupcommit.Batch, report func(error)) {
		if set, ok := b.Join("accept", func() groupcommit.Set { return &acceptSet{} }); ok {
			set.(*acceptSet).add(d, traceparent, res, report)
			return
		}
		b.Queue(acceptSQL, acceptArgs(d, traceparent)...).QueryRow(func(row pgx.Row) error {
			out, err := scanOutcome(row)
			*res = out
			report(err)
			return err
		})
	}
}

// acceptSet stores the deliveries of one group commit with one boardreadyops_webhook_accept_batch
// statement. The deliveries it leaves out (redeliveries) run alone through the single-row
// function, which reports them as duplicates (groupcommit.ErrAlone).
type acceptSet struct {
	ids, events, payloads       []string
	actions, traceparents       []*string
	installations, repositories []*int64
	digests                     [][]byte
	members                     []acceptMember
}

type acceptMember struct {
	deliveryID string
	res        *webhook.Outcome
	report     func(error)
}

// add appends d as one element of each of the statement's parallel arrays (acceptArgs' values).
func (a *acceptSet) add(d webhook.Delivery, traceparent string, res *webhook.Outcome, report func(error)) {
	a.ids = append(a.ids, d.ID)
	a.events = append(a.events, d.Event)
	a.actions = append(a.actions, nullString(d.Action))
	a.installations = append(a.installations, nullInt(d.InstallationID))
	a.repositories = append(a.repositories, nullInt(d.RepositoryID))
	a.payloads = append(a.payloads, string(d.Document)) // as text, cast to jsonb[] by the statement
	a.digests = append(a.digests, d.PayloadSHA256[:])
	a.traceparents = append(a.traceparents, nullString(traceparent))
	a.members = append(a.members, acceptMember{deliveryID: d.ID, res: res, report: report})
}

func (a *acceptSet) Queue(b *pgx.Batch) {
	b.Queue(`SELECT delivery_id, inbox_id, job_id FROM boardreadyops_webhook_accept_batch($1, $2, $3, $4, $5, $6::jsonb[], $7, $8)`,
		a.ids, a.events, a.actions, a.installations, a.repositories, a.payloads, a.digests, a.traceparents).
		Query(func(rows pgx.Rows) error {
			stored := make(map[string]webhook.Outcome, len(a.members))
			for rows.Next() {
				var id string
				var out webhook.Outcome
				if err := rows.Scan(&id, &out.InboxID, &out.JobID); err != nil {
					rows.Close()
					return a.fail(err)
				}
				stored[id] = out
			}
			if err := rows.Err(); err != nil {
				return a.fail(err)
			}
			for _, m := range a.members {
				out, ok := stored[m.deliveryID]
				if !ok {
					m.report(groupcommit.ErrAlone) // a redelivery or a replay: alone, it is reported as such
					continue
				}
				delete(stored, m.deliveryID) // the same id twice in a batch: the second is the duplicate
				*m.res = out
				m.report(nil)
			}
			return nil
		})
}

func (a *acceptSet) fail(err error) error {
	for _, m := range a.members {
		m.report(err)
	}
	return err
}

func scanOutcome(row pgx.Row) (webhook.Outcome, error) {
	var out webhook.Outcome
	var inboxID, jobID *int64 // a replay's first delivery may be swept from the inbox already
	if err := row.Scan(&inboxID, &jobID, &out.Duplicate, &out.Replayed); err != nil {
		return webhook.Outcome{}, err
	}
	if inboxID != nil {
		out.InboxID = *inboxID
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
