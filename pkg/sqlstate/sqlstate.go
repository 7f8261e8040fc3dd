// Package sqlstate turns the project's SQLSTATE codes, raised by the state-machine functions in
// schema/migrations, into sentinel errors that callers test with errors.Is.
package sqlstate

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors, one per project SQLSTATE. The wrapped *pgconn.PgError keeps the database's
// message, detail and hint.
var (
	// ErrLeaseNotHeld (BR001): the record is not leased by this worker — it was never claimed,
	// is already finished, or its lease expired and another worker took it over.
	ErrLeaseNotHeld = errors.New("lease not held")
	// ErrWrongEffectType (BR002): the operation does not apply to this effect type.
	ErrWrongEffectType = errors.New("wrong effect type")
	// ErrIllegalState (BR003): the record's state does not allow the operation.
	ErrIllegalState = errors.New("illegal state for operation")
	// ErrReconciliationRequired (BR004): a replay was refused because the workflow dispatch may
	// already have reached GitHub; it must be reconciled instead.
	ErrReconciliationRequired = errors.New("reconciliation required")
	// ErrCannotAdvance (BR005): the release run or execution attempt cannot take this transition.
	ErrCannotAdvance = errors.New("release run cannot advance")
	// ErrNotFound (BR006): no such record.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument (22023): an argument was out of range or missing.
	ErrInvalidArgument = errors.New("invalid argument")
)

var byCode = map[string]error{
	"BR001": ErrLeaseNotHeld,
	"BR002": ErrWrongEffectType,
	"BR003": ErrIllegalState,
	"BR004": ErrReconciliationRequired,
	"BR005": ErrCannotAdvance,
	"BR006": ErrNotFound,
	"22023": ErrInvalidArgument,
}

// Error is a classified database error: errors.Is matches its sentinel, errors.As finds the
// *pgconn.PgError.
type Error struct {
	Sentinel error
	PG       *pgconn.PgError
}

func (e *Error) Error() string {
	msg := e.PG.Message
	if e.PG.Detail != "" {
		msg += " (" + e.PG.Detail + ")"
	}
	if e.PG.Hint != "" {
		msg += "; hint: " + e.PG.Hint
	}
	return fmt.Sprintf("%v: %s", e.Sentinel, msg)
}

// Is reports whether target is this error's sentinel.
func (e *Error) Is(target error) bool { return target == e.Sentinel }

// Unwrap exposes the PostgreSQL error.
func (e *Error) Unwrap() error { return e.PG }

// Classify wraps err in an *Error when it carries one of the project's SQLSTATEs and returns it
// unchanged otherwise (nil stays nil).
func Classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	if s, ok := byCode[pgErr.Code]; ok {
		return &Error{Sentinel: s, PG: pgErr}
	}
	return err
}

// Hint returns the database's hint for a classified error (what to do instead), or "".
func Hint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Hint
	}
	return ""
}
