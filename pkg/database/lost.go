package database

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ConnectionLost reports whether err means the connection a statement used is gone — its server
// shut down or crashed (SQLSTATE 57P01, 57P02: what every connection to a killed primary answers
// on its next use after a failover), a connection exception (class 08), the server not accepting
// connections yet (57P03), or the connection broken under the client (EOF, a network error) or
// closed before anything was sent — rather than the statement failing. Another connection of
// the pool may succeed: after a failover it reaches the new primary. Whether the statement
// committed is unknown, so only idempotent writes may be sent again.
func ConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	if pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var netErr *net.OpError
	return errors.As(err, &netErr)
}
