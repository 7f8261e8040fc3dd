package sqlstate_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/sqlstate"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code string
		want error
	}{
		{"BR001", sqlstate.ErrLeaseNotHeld},
		{"BR002", sqlstate.ErrWrongEffectType},
		{"BR003", sqlstate.ErrIllegalState},
		{"BR004", sqlstate.ErrReconciliationRequired},
		{"BR005", sqlstate.ErrCannotAdvance},
		{"BR006", sqlstate.ErrNotFound},
		{"22023", sqlstate.ErrInvalidArgument},
	}
	for _, tt := range tests {
		pgErr := &pgconn.PgError{Code: tt.code, Message: "m", Hint: "do this"}
		err := fmt.Errorf("layer: %w", sqlstate.Classify(fmt.Errorf("query: %w", pgErr)))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v is not %v", tt.code, err, tt.want)
		}
		var back *pgconn.PgError
		if !errors.As(err, &back) || back.Code != tt.code {
			t.Errorf("%s: PgError not reachable", tt.code)
		}
		if sqlstate.Hint(err) != "do this" {
			t.Errorf("%s: hint lost", tt.code)
		}
	}
	other := &pgconn.PgError{Code: "23505"}
	if got := sqlstate.Classify(other); got != error(other) { //nolint:errorlint // identity: the same value must come back, not a wrapper
		t.Errorf("unrelated code was wrapped: %v", got)
	}
	if sqlstate.Classify(nil) != nil {
		t.Error("nil became non-nil")
	}
}
