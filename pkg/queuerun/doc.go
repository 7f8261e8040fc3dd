// Package queuerun holds the mechanics every PostgreSQL queue runner of the product shares,
// whatever its queue:
//
//   - waking idle loops: at once on a NOTIFY (or work the process made itself), otherwise after
//     a poll interval, so that a lost notification costs latency and never work ([Waker]);
//   - capped exponential backoff with jitter for failing items ([Backoff]);
//   - the lease-safe claim: once begun it is not cancelled by shutdown, because the server could
//     commit a claim whose client saw a cancellation and strand its rows until their leases
//     expire; it is timed and recorded as one span linked to the claimed items' traces
//     ([Claimer]);
//   - periodic upkeep with jitter — lease recovery and queue statistics ([Task], [Upkeep],
//     [Recovery], [Stats]);
//   - the instruments those report to ([Metrics], registered with promauto on the registry it
//     is given, never the global one).
//
// [Runner] ties them together for one queue: a runner's own loop takes [Waker.Next], calls
// [Runner.Claim] and, when idle, [Waker.Sleep], while [Runner.Background] runs LISTEN and the
// upkeep.
//
// It owns no queue. The states, tables and state-machine functions of lifecycle's jobs
// (pkg/jobs) and of the outbox (pkg/outbox) differ on purpose, and each runner
// (services/lifecycle/internal/worker, services/outbox-dispatcher/internal/dispatcher) keeps
// its own loop, what it does with a claimed batch, and the names of its metrics.
package queuerun
