package main

import "fmt"

// Dashboard uids; each is also the file name in the chart.
const (
	overviewUID   = "boardreadyops-overview"
	ingestUID     = "boardreadyops-ingest"
	lifecycleUID  = "boardreadyops-lifecycle"
	dispatcherUID = "boardreadyops-dispatcher"
)

var titles = map[string]string{
	overviewUID:   "BoardReadyOps overview",
	ingestUID:     "BoardReadyOps ingest",
	lifecycleUID:  "BoardReadyOps lifecycle",
	dispatcherUID: "BoardReadyOps outbox dispatcher",
}

func boards() []board {
	return []board{overview(), ingest(), lifecycle(), dispatcher()}
}

// serviceJobs selects a series of each of the three services, for the overview's job variable.
const serviceJobs = `{__name__=~"boardreadyops_(ingest_deliveries_total|lifecycle_jobs|outbox_effects)"}`

func overview() board {
	return board{
		uid:         overviewUID,
		title:       titles[overviewUID],
		description: "The flow from webhook to GitHub effect, what needs an operator, GitHub's budget, retention and the broker-transition triggers. Each service has its own dashboard (links above).",
		jobsBy:      serviceJobs,
		links:       []string{ingestUID, lifecycleUID, dispatcherUID},
		rows: []row{
			{"SLOs (99 % of release runs; docs/operations.md, SLOs)", sloPanels()},
			{"Flow", flowPanels()},
			{"Attention", attentionPanels()},
			{"GitHub", githubPanels()},
			{"Retention", retentionPanels()},
			{"Broker-transition triggers (evaluate a broker only after database and index tuning)", brokerPanels()},
		},
	}
}

// The release SLOs' indicators (histograms the dispatcher observes) and their thresholds.
const (
	visibleSLI = "boardreadyops_release_check_run_visible_seconds"
	// A scrape in the OpenMetrics format (Prometheus's preferred one) writes the bucket bound as
	// "60.0", the classic text format as "60": match both.
	visibleWithin = `le=~"60|60.0"`
	shownSLI      = "boardreadyops_release_conclusion_shown_seconds"
	shownWithin   = `le=~"300|300.0"`
	sloObjective  = 0.99
)

// goodRatio is the share of a histogram's observations at or under a bucket.
func goodRatio(histogram, le string) string {
	return `sum(` + rate(m(histogram+"_bucket", le)) + `) / sum(` + rate(m(histogram+"_count")) + `)`
}

func sloPanels() []panel {
	burn := func(histogram, le string) string {
		return `(1 - ` + goodRatio(histogram, le) + fmt.Sprintf(`) / %g`, 1-sloObjective)
	}
	return []panel{
		{
			title:       "Check run visible within 60 s of the tag push",
			description: "Share of release runs whose check run was created on GitHub within 60 s of the tag push, over the rate interval. Objective 99 % (red line); the axis starts at 90 %.",
			unit:        "percentunit",
			threshold:   sloObjective,
			min:         new(0.9),
			queries:     []query{{goodRatio(visibleSLI, visibleWithin), "within 60 s"}},
		},
		{
			title:       "Conclusion shown within 5 min of workflow_run.completed",
			description: "Share of completed workflow runs whose conclusion the check run showed within 300 s, over the rate interval. Objective 99 % (red line); the axis starts at 90 %.",
			unit:        "percentunit",
			threshold:   sloObjective,
			min:         new(0.9),
			queries:     []query{{goodRatio(shownSLI, shownWithin), "within 5 min"}},
		},
		{
			title:       "Error budget burn rate",
			description: "How fast each SLO spends its error budget over the rate interval (1 = exactly the budget). The burn-rate alerts page at 14.4 (red line) over 1 h and 5 min, and warn at 6 over 6 h and 30 min.",
			unit:        "short",
			threshold:   14.4,
			queries: []query{
				{burn(visibleSLI, visibleWithin), "check run visible"},
				{burn(shownSLI, shownWithin), "conclusion shown"},
			},
		},
	}
}

func flowPanels() []panel {
	return []panel{
		deliveriesByResult(),
		jobsByState(),
		effectsByState(),
		{
			title:       "Oldest available age",
			description: "Age of the oldest effect and of the oldest job that are due and not claimed: how far the workers are behind.",
			unit:        "s",
			queries: []query{
				{`max(` + m("boardreadyops_outbox_oldest_available_effect_age_seconds") + `)`, "effects"},
				{`max(` + m("boardreadyops_lifecycle_oldest_available_job_age_seconds") + `)`, "jobs"},
			},
		},
		{
			title:       "Outbox lag p50 / p99",
			description: "Time from an effect's creation to its completion, over all effect types.",
			unit:        "s",
			queries: []query{
				{quantile(0.5, "boardreadyops_outbox_lag_seconds"), "p50"},
				{quantile(0.99, "boardreadyops_outbox_lag_seconds"), "p99"},
			},
		},
		{
			title:       "Claim latency p50 / p99",
			description: "Duration of one claim query: the outbox's (dispatcher) and the job queue's (lifecycle).",
			unit:        "s",
			queries: []query{
				{quantile(0.5, "boardreadyops_outbox_claim_duration_seconds"), "outbox p50"},
				{quantile(0.99, "boardreadyops_outbox_claim_duration_seconds"), "outbox p99"},
				{quantile(0.99, "boardreadyops_lifecycle_claim_duration_seconds"), "jobs p99"},
			},
		},
	}
}

func attentionPanels() []panel {
	return []panel{
		{
			title:            "Dead letters",
			description:      "Effects and jobs that exhausted their attempts and wait for an operator (docs/operations.md, dead letters).",
			unit:             "short",
			emptyWhenHealthy: true,
			queries: []query{
				{`max(` + m("boardreadyops_outbox_effects", `state="dead_letter"`) + `)`, "effects"},
				{`max(` + m("boardreadyops_lifecycle_jobs", `state="dead_letter"`) + `)`, "jobs"},
			},
		},
		{
			title:            "Reconciliation required",
			description:      "Dispatches whose outcome at GitHub is unknown; an operator reconciles them (docs/operations.md). Any is red.",
			unit:             "short",
			threshold:        0.5,
			emptyWhenHealthy: true,
			queries:          []query{{`max(` + m("boardreadyops_outbox_effects", `state="reconciliation_required"`) + `)`, "dispatches"}},
		},
		effectsByOutcome(),
		{
			title:            "Stale release runs",
			description:      "Release runs not in a terminal state whose state has not changed for the stale threshold, over all states (brops release-runs list --unchanged-for shows them).",
			unit:             "short",
			emptyWhenHealthy: true,
			queries:          []query{{`sum(max by (state) (` + m("boardreadyops_release_runs_stale") + `))`, "stale runs"}},
		},
		{
			title: "Unmatched workflow completions",
			description: "Release-workflow workflow_run deliveries per second recorded as unmatched: no dispatched attempt took them within the match window (a run started outside the product, or a lost match). " +
				"Also those that ran another commit than their release run's (its tag moved just before the dispatch), each of which failed its run.",
			unit:             "ops",
			emptyWhenHealthy: true,
			queries: []query{{`sum(` + rate(m("boardreadyops_workflow_completions_unmatched_total")) + `)`, "unmatched"},
				{`sum(` + rate(m("boardreadyops_release_workflow_other_commit_total")) + `)`, "ran another commit"}},
		},
		{
			title:            "Retention falling behind",
			description:      "How long the oldest row past its retention has been past it, over all tables; 0 while retention keeps up (the Retention row has it by table).",
			unit:             "s",
			emptyWhenHealthy: true,
			queries:          []query{{`max(` + m("boardreadyops_retention_oldest_expired_seconds") + `)`, "oldest expired"}},
		},
	}
}

func githubPanels() []panel {
	return []panel{
		githubRequests(),
		{
			title:            "Rate-limit deferrals",
			description:      "Effects per second put back because their installation is rate limited, over all effect types (the dispatcher dashboard has them by type).",
			unit:             "ops",
			width:            12,
			emptyWhenHealthy: true,
			queries:          []query{{`sum(` + rate(m("boardreadyops_outbox_rate_limit_deferrals_total")) + `)`, "deferrals"}},
		},
		budgetPanel(24),
	}
}

// budgetPanel shows the GitHub budget: installations blocked and paced, the lowest budget left.
func budgetPanel(width uint32) panel {
	return panel{
		title:       "GitHub rate limits: installations blocked and paced, lowest budget left",
		description: "Installations blocked because GitHub rate-limited them (shared by every replica; the alert fires when any stay blocked 15 minutes), installations held back by per-installation pacing (normal under load), and the lowest share of its primary budget any installation has left (right axis).",
		unit:        "short",
		width:       width,
		queries: []query{
			{`max(` + m("boardreadyops_github_installations_rate_limited") + `)`, "blocked"},
			{`max(` + m("boardreadyops_github_installations_paced") + `)`, "paced"},
			{`min(` + m("boardreadyops_github_budget_lowest_remaining_ratio") + `)`, "lowest budget left"},
		},
		rightAxis: &override{legend: "lowest budget left", unit: "percentunit", max: 1},
	}
}

func retentionPanels() []panel {
	return []panel{
		{
			title:            "Rows deleted by retention, by table",
			description:      "Rows per second the retention maintenance deletes, by table.",
			unit:             "ops",
			emptyWhenHealthy: true,
			queries:          []query{{`sum by (table) (` + rate(m("boardreadyops_retention_deleted_rows_total")) + `)`, "{{table}}"}},
		},
		{
			title:            "Oldest expired row, by table",
			description:      "How long the oldest row past its retention has been past it, by table; it grows when deletion falls behind.",
			unit:             "s",
			emptyWhenHealthy: true,
			queries:          []query{{`max by (table) (` + m("boardreadyops_retention_oldest_expired_seconds") + `)`, "{{table}}"}},
		},
		{
			title:       "Retention pass duration and leader",
			description: "How long the last complete retention pass took (the longest over the replicas, left), and how many lifecycle replicas hold the retention lease (right; exactly 1 is healthy).",
			unit:        "s",
			queries: []query{
				{`max(` + m("boardreadyops_retention_last_pass_seconds") + `)`, "last pass"},
				{`sum(` + m("boardreadyops_retention_leader") + `)`, "leaders"},
			},
			rightAxis: &override{legend: "leaders", unit: "short", max: 2},
		},
		{
			title:       "Retention passes, by outcome",
			description: "Retention passes per minute that completed and that failed; failed passes with none completed for an hour is BoardReadyOpsRetentionPassesFailing (docs/operations.md, \"Runbook: retention behind\").",
			unit:        "opm",
			queries:     []query{{`60 * sum by (outcome) (` + rate(m("boardreadyops_retention_passes_total")) + `)`, "{{outcome}}"}},
		},
	}
}

func brokerPanels() []panel {
	return []panel{
		{
			title:       "Claim latency p99 vs 250 ms",
			description: "Trigger: persistently above 250 ms (the operator's claim_latency trigger, docs/operator.md).",
			unit:        "s",
			threshold:   0.25,
			queries:     []query{{quantile(0.99, "boardreadyops_outbox_claim_duration_seconds"), "p99"}},
		},
		{
			title:       "Oldest available age vs 30 s (dispatchers up)",
			description: "Trigger: persistently above 30 s while dispatcher workers are healthy (shown only while a dispatcher reports).",
			unit:        "s",
			threshold:   30,
			queries: []query{{`max(` + m("boardreadyops_outbox_oldest_available_effect_age_seconds") +
				`) and on() count(` + m("boardreadyops_outbox_deliveries_in_flight") + `) > 0`, "oldest age"}},
		},
		{
			title:       "Throughput vs 500 effects/s",
			description: "Trigger: above 500 completed effects/s for 15 minutes.",
			unit:        "ops",
			threshold:   500,
			queries:     []query{{`sum(` + rate(m("boardreadyops_outbox_effects_processed_total", `outcome="completed"`)) + `)`, "completed/s"}},
		},
	}
}
