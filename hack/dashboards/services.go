package main

func ingest() board {
	return board{
		uid:         ingestUID,
		title:       titles[ingestUID],
		description: "The webhook receiver: deliveries by event and result, response time, requests in flight and the process.",
		jobsBy:      `boardreadyops_ingest_deliveries_total`,
		links:       []string{overviewUID, lifecycleUID, dispatcherUID},
		rows: []row{
			{"Webhooks", []panel{
				deliveriesByResult(),
				{
					title:       "Deliveries, by event",
					description: "Webhook deliveries received per second, by GitHub event (handled events, else other).",
					unit:        "reqps",
					queries:     []query{{`sum by (event) (` + rate(m("boardreadyops_ingest_deliveries_total")) + `)`, "{{event}}"}},
				},
				{
					title:       "Response time p50 / p99",
					description: "Time from the request's start to the response, over all results. GitHub gives up on a delivery after 10 s.",
					unit:        "s",
					queries: []query{
						{quantile(0.5, "boardreadyops_ingest_request_duration_seconds"), "p50"},
						{quantile(0.99, "boardreadyops_ingest_request_duration_seconds"), "p99"},
					},
				},
				{
					title:       "Response time p99, by result",
					description: "99th percentile of the response time, by result.",
					unit:        "s",
					queries:     []query{{quantile(0.99, "boardreadyops_ingest_request_duration_seconds", "result"), "{{result}}"}},
				},
				{
					title:       "Requests in flight",
					description: "Webhook requests being handled now, summed over the replicas.",
					unit:        "short",
					queries:     []query{{`sum(` + m("boardreadyops_ingest_requests_in_flight") + `)`, "in flight"}},
				},
				{
					title:            "Secret reload errors",
					description:      "Failed re-reads of the webhook secrets file per second; the previous secrets stay in use.",
					unit:             "ops",
					emptyWhenHealthy: true,
					queries:          []query{{`sum(` + rate(m("boardreadyops_ingest_secret_reload_errors_total")) + `)`, "errors"}},
				},
			}},
			processRow(),
		},
	}
}

func lifecycle() board {
	return board{
		uid:         lifecycleUID,
		title:       titles[lifecycleUID],
		description: "The control-plane job worker: jobs by state and outcome, lag, claims, recovered leases and the process.",
		jobsBy:      `boardreadyops_lifecycle_jobs`,
		links:       []string{overviewUID, ingestUID, dispatcherUID},
		rows: []row{
			{"Jobs", []panel{
				{
					title:       "Jobs processed, by outcome",
					description: "Jobs finished per second, by outcome (applied, ignored, unmatched, deferred, retried, dead_letter).",
					unit:        "ops",
					queries:     []query{{`sum by (outcome) (` + rate(m("boardreadyops_lifecycle_jobs_processed_total")) + `)`, "{{outcome}}"}},
				},
				{
					title:       "Jobs processed, by kind",
					description: "Jobs finished per second, by kind (the webhook event that made them).",
					unit:        "ops",
					queries:     []query{{`sum by (kind) (` + rate(m("boardreadyops_lifecycle_jobs_processed_total")) + `)`, "{{kind}}"}},
				},
				{
					title:       "Effects enqueued",
					description: "Outbox effects lifecycle enqueued per second, for the dispatcher to perform.",
					unit:        "ops",
					queries:     []query{{`sum(` + rate(m("boardreadyops_lifecycle_effects_enqueued_total")) + `)`, "effects"}},
				},
				jobsByState(),
				{
					title:       "Job lag p50 / p99",
					description: "Time from a job's creation (the webhook's acceptance) to its completion.",
					unit:        "s",
					queries: []query{
						{quantile(0.5, "boardreadyops_lifecycle_job_lag_seconds"), "p50"},
						{quantile(0.99, "boardreadyops_lifecycle_job_lag_seconds"), "p99"},
					},
				},
				{
					title:       "Oldest available job age",
					description: "Age of the oldest job that is due and not claimed.",
					unit:        "s",
					queries:     []query{{`max(` + m("boardreadyops_lifecycle_oldest_available_job_age_seconds") + `)`, "oldest"}},
				},
				{
					title:       "Claim latency p50 / p99",
					description: "Duration of one job claim query.",
					unit:        "s",
					queries: []query{
						{quantile(0.5, "boardreadyops_lifecycle_claim_duration_seconds"), "p50"},
						{quantile(0.99, "boardreadyops_lifecycle_claim_duration_seconds"), "p99"},
					},
				},
				{
					title:            "Leases recovered",
					description:      "Expired job leases recovered per second (a worker died or stalled holding them), over all target states.",
					unit:             "ops",
					emptyWhenHealthy: true,
					queries:          []query{{`sum(` + rate(m("boardreadyops_lifecycle_leases_recovered_total")) + `)`, "recovered"}},
				},
				{
					title:            "Dead-lettered jobs",
					description:      "Jobs in dead_letter, waiting for an operator (brops jobs).",
					unit:             "short",
					emptyWhenHealthy: true,
					queries:          []query{{`max(` + m("boardreadyops_lifecycle_jobs", `state="dead_letter"`) + `)`, "dead letters"}},
				},
			}},
			processRow(),
		},
	}
}

func dispatcher() board {
	return board{
		uid:         dispatcherUID,
		title:       titles[dispatcherUID],
		description: "The outbox dispatcher: effects by state and outcome, lag, claims, GitHub requests and budget, and the process.",
		jobsBy:      `boardreadyops_outbox_effects`,
		links:       []string{overviewUID, ingestUID, lifecycleUID},
		rows: []row{
			{"Effects", []panel{
				effectsByOutcome(),
				{
					title:       "Effects processed, by type",
					description: "Effects finished per second, by effect type.",
					unit:        "ops",
					queries:     []query{{`sum by (effect_type) (` + rate(m("boardreadyops_outbox_effects_processed_total")) + `)`, "{{effect_type}}"}},
				},
				effectsByState(),
				{
					title:       "Outbox lag p99, by type",
					description: "99th percentile of the time from an effect's creation to its completion, by effect type.",
					unit:        "s",
					queries:     []query{{quantile(0.99, "boardreadyops_outbox_lag_seconds", "effect_type"), "{{effect_type}}"}},
				},
				{
					title:       "Oldest available effect age",
					description: "Age of the oldest effect that is due and not claimed.",
					unit:        "s",
					queries:     []query{{`max(` + m("boardreadyops_outbox_oldest_available_effect_age_seconds") + `)`, "oldest"}},
				},
				{
					title:       "Deliveries in flight",
					description: "Deliveries being performed now, summed over the replicas.",
					unit:        "short",
					queries:     []query{{`sum(` + m("boardreadyops_outbox_deliveries_in_flight") + `)`, "in flight"}},
				},
				{
					title:       "Claim latency p50 / p99",
					description: "Duration of one outbox claim query; the broker-transition trigger is p99 above 250 ms.",
					unit:        "s",
					threshold:   0.25,
					queries: []query{
						{quantile(0.5, "boardreadyops_outbox_claim_duration_seconds"), "p50"},
						{quantile(0.99, "boardreadyops_outbox_claim_duration_seconds"), "p99"},
					},
				},
				{
					title:            "Leases recovered",
					description:      "Expired outbox leases recovered per second (a dispatcher died or stalled holding them), over all target states.",
					unit:             "ops",
					emptyWhenHealthy: true,
					queries:          []query{{`sum(` + rate(m("boardreadyops_outbox_leases_recovered_total")) + `)`, "recovered"}},
				},
				{
					title:            "Dead letters and reconciliation",
					description:      "Effects in dead_letter and in reconciliation_required, waiting for an operator (docs/operations.md).",
					unit:             "short",
					emptyWhenHealthy: true,
					queries: []query{
						{`max(` + m("boardreadyops_outbox_effects", `state="dead_letter"`) + `)`, "dead letters"},
						{`max(` + m("boardreadyops_outbox_effects", `state="reconciliation_required"`) + `)`, "reconciliation"},
					},
				},
			}},
			{"GitHub API", []panel{
				githubRequests(),
				{
					title:       "Request duration p99, by operation",
					description: "99th percentile of the GitHub API request duration, by operation.",
					unit:        "s",
					width:       12,
					queries:     []query{{quantile(0.99, "boardreadyops_github_request_duration_seconds", "operation"), "{{operation}}"}},
				},
				budgetPanel(12),
				{
					title:            "Rate-limit deferrals, by type",
					description:      "Effects per second put back because their installation is rate limited, by effect type.",
					unit:             "ops",
					width:            12,
					emptyWhenHealthy: true,
					queries:          []query{{`sum by (effect_type) (` + rate(m("boardreadyops_outbox_rate_limit_deferrals_total")) + `)`, "{{effect_type}}"}},
				},
			}},
			processRow(),
		},
	}
}

// processRow is the Go runtime and process metrics every service exports.
func processRow() row {
	return row{"Process", []panel{
		{
			title:       "CPU cores used, by instance",
			description: "CPU seconds each instance uses per second: 1 is one core busy.",
			unit:        "short",
			width:       6,
			queries:     []query{{`sum by (instance) (` + rate(m("process_cpu_seconds_total")) + `)`, "{{instance}}"}},
		},
		{
			title:       "Resident memory, by instance",
			description: "Resident set size of each instance.",
			unit:        "bytes",
			width:       6,
			queries:     []query{{`max by (instance) (` + m("process_resident_memory_bytes") + `)`, "{{instance}}"}},
		},
		{
			title:       "Goroutines, by instance",
			description: "Goroutines alive in each instance; a steady climb is a leak.",
			unit:        "short",
			width:       6,
			queries:     []query{{`max by (instance) (` + m("go_goroutines") + `)`, "{{instance}}"}},
		},
		{
			title: "Waiting for a database connection, by instance",
			description: "Seconds per second the callers of each instance wait for a pooled connection because none is idle " +
				"(docs/operations.md, \"Database pool metrics\"); a ratio, not a latency: 0.5 is half a caller waiting all the time. Near 1 or more: raise BOARDREADYOPS_DB_MAX_CONNS.",
			unit:             "short",
			width:            6,
			emptyWhenHealthy: true,
			queries:          []query{{`sum by (instance) (` + rate(m("boardreadyops_db_pool_empty_acquire_wait_seconds_total")) + `)`, "{{instance}}"}},
		},
	}}
}
