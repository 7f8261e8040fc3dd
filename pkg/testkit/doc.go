// Package testkit holds the packages that exist for tests, the local run (make run) and the
// benchmarks, never for production: per-test databases (pgtest), a private PostgreSQL server
// (pgcluster), loopback ports (freeport), the GitHub API simulator (githubsim) and the envtest
// binaries (envtestassets). No service binary imports them; TestServicesDoNotImportTestkit checks.
package testkit
