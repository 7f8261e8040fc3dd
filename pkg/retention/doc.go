// Package retention deletes what the control plane no longer needs (docs/operations.md
// "Retention"): completed jobs with their inbox rows, completed effects of finished release runs,
// finished release runs with their attempts and effects, the replay-defence body digests past the
// replay window whose delivery has left the inbox, and — only when configured — audit rows.
// Dead letters, reconciliation_required effects and anything a release run that is not finished
// still refers to are never deleted.
//
// Store is the Go face of the retention functions of migration 00027; Service is the maintenance
// loop lifecycle runs: one replica at a time holds the retention lease (a row, so that it works
// through a transaction-pooling PgBouncer) and deletes in bounded batches with a pause between
// them. Every replica exports the age of the oldest row past its retention, so the alert fires
// even when no replica is the leader.
package retention
