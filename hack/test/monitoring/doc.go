// Package monitoring is the live test of the dashboards and alert rules (`make test-monitoring`,
// behind the build tag "monitoring" so that `make test` never runs it; no root needed): Debian's
// Prometheus on loopback scrapes the real ingest, lifecycle and outbox-dispatcher processes
// while an end-to-end load runs; every panel query of every dashboard in
// charts/boardreadyops/dashboards is evaluated through query_range and must return data; every
// rule loads with health ok; three alerts are driven to fire and resolve (dispatcher stopped, an
// effect GitHub refuses, a dispatch that needs reconciliation); and Debian's Alertmanager
// delivers their notifications, annotations filled in, to a loopback webhook receiver.
package monitoring
