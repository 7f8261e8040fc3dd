package main

// Panels that both the overview and a service's dashboard show.

func deliveriesByResult() panel {
	return panel{
		title:       "Webhooks in, by result",
		description: "Webhook deliveries ingest received per second, by result (accepted, duplicate, ignored, rejected...).",
		unit:        "reqps",
		queries:     []query{{`sum by (result) (` + rate(m("boardreadyops_ingest_deliveries_total")) + `)`, "{{result}}"}},
	}
}

func jobsByState() panel {
	return panel{
		title:       "Jobs by state",
		description: "Control-plane jobs in the database by state, as counted by lifecycle (every replica reports the same count, hence max).",
		unit:        "short",
		queries:     []query{{`max by (state) (` + m("boardreadyops_lifecycle_jobs") + `)`, "{{state}}"}},
	}
}

func effectsByState() panel {
	return panel{
		title:       "Effects by state",
		description: "Outbox effects in the database by state, as counted by the dispatcher (every replica reports the same count, hence max).",
		unit:        "short",
		queries:     []query{{`max by (state) (` + m("boardreadyops_outbox_effects") + `)`, "{{state}}"}},
	}
}

func effectsByOutcome() panel {
	return panel{
		title:       "Effects processed, by outcome",
		description: "Effects the dispatchers finished per second, by outcome (completed, retried, deferred, dead_letter, reconciliation_required, lease_lost, store_failed).",
		unit:        "ops",
		queries:     []query{{`sum by (outcome) (` + rate(m("boardreadyops_outbox_effects_processed_total")) + `)`, "{{outcome}}"}},
	}
}

func githubRequests() panel {
	return panel{
		title:       "GitHub requests, by operation and status class",
		description: "GitHub API requests per second from the dispatchers, by operation and status class (2xx, 4xx, 5xx, rate_limited, error).",
		unit:        "reqps",
		width:       12,
		queries:     []query{{`sum by (operation, status_class) (` + rate(m("boardreadyops_github_requests_total")) + `)`, "{{operation}} {{status_class}}"}},
	}
}
