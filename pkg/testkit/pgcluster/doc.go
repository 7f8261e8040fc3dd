// Package pgcluster starts and stops a private PostgreSQL server from the server binaries
// installed on the machine (initdb, postgres), for tests and for the local run.
//
// The server listens on 127.0.0.1 on a free port and on a Unix socket inside its own directory,
// trusts local connections, and belongs to the process that started it: when that process dies,
// even by a panic or SIGKILL, the kernel sends the server SIGQUIT (Linux parent-death signal), so
// no orphan postmaster outlives a test run. When the caller is root the server runs as an
// unprivileged OS user, as PostgreSQL requires.
package pgcluster
