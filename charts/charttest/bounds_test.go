package charttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// boundRow is one bound a service (or the API server) enforces on a setting the chart renders.
type boundRow struct {
	name string
	// bad are value patches (YAML over ci/minimal-values.yaml) the chart must refuse at render
	// time, with an error naming every string of want.
	bad  []string
	want []string
	// good are the edge values on the other side of the bound: the chart renders them and the
	// target starts with what it rendered.
	good []string
	// target checks the rendered settings for real: "ingest", "lifecycle", "outbox-dispatcher"
	// run the service's binary on the container's environment (its configuration validation, up
	// to the database connection); "redeliver" runs brops on the CronJob's arguments;
	// "outboxmonitor" is a server-side dry run of the OutboxMonitor against envtest's API server.
	target string
	// refused are settings the bad values render to (environment variables, or for redeliver
	// the argument, for outboxmonitor the field's dotted path under spec), laid over the first
	// good value's rendering: the target must refuse each, so the chart's bound is the code's
	// bound.
	refused []map[string]string
}

// boundRows are the bounds the services check at startup (services/*/internal/app validate,
// pkg/config, pkg/retention) and the OutboxMonitor CRD's: values beyond them used to pass the
// schema and render, and then the pods crash-looped (or the hook, or every CronJob run, failed).
var boundRows = []boundRow{{
	name:    "outboxDispatcher.leaseSeconds at least 10",
	bad:     []string{"outboxDispatcher: {leaseSeconds: 9, githubRequestTimeout: 4s}", "outboxDispatcher: {leaseSeconds: 5, githubRequestTimeout: 2s}"},
	want:    []string{"leaseSeconds"},
	good:    []string{"outboxDispatcher: {leaseSeconds: 10, githubRequestTimeout: 5s}", "outboxDispatcher: {leaseSeconds: 3600}"},
	target:  "outbox-dispatcher",
	refused: []map[string]string{{"BOARDREADYOPS_DISPATCHER_LEASE": "9s", "BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT": "4s"}},
}, {
	name: "outboxDispatcher.githubRequestTimeout at most half the lease",
	bad: []string{"outboxDispatcher: {leaseSeconds: 60, githubRequestTimeout: 31s}", "outboxDispatcher: {leaseSeconds: 60, githubRequestTimeout: 30001ms}",
		"outboxDispatcher: {leaseSeconds: 10, githubRequestTimeout: 20s}", "outboxDispatcher: {githubRequestTimeout: 0s}"},
	want: []string{"outboxDispatcher.githubRequestTimeout", "outboxDispatcher.leaseSeconds", "half"},
	good: []string{"outboxDispatcher: {leaseSeconds: 60, githubRequestTimeout: 30s}", "outboxDispatcher: {leaseSeconds: 11, githubRequestTimeout: 5.5s}",
		"outboxDispatcher: {githubRequestTimeout: 1ns}"},
	target: "outbox-dispatcher",
	refused: []map[string]string{{"BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT": "31s"}, {"BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT": "0s"},
		{"BOARDREADYOPS_DISPATCHER_LEASE": "10s", "BOARDREADYOPS_GITHUB_REQUEST_TIMEOUT": "20s"}},
}, {
	name:    "outboxDispatcher.perInstallation at most the concurrency",
	bad:     []string{"outboxDispatcher: {concurrency: 4, perInstallation: 5}", "outboxDispatcher: {perInstallation: 33}", "outboxDispatcher: {concurrency: 1024, perInstallation: 1025}"},
	want:    []string{"perInstallation"},
	good:    []string{"outboxDispatcher: {concurrency: 4, perInstallation: 4}", "outboxDispatcher: {concurrency: 4, perInstallation: 0}", "outboxDispatcher: {concurrency: 1024, perInstallation: 1024}"},
	target:  "outbox-dispatcher",
	refused: []map[string]string{{"BOARDREADYOPS_DISPATCHER_PER_INSTALLATION": "5"}},
}, {
	name:    "outboxDispatcher.mutationInterval at most 1m",
	bad:     []string{"outboxDispatcher: {mutationInterval: 2m}", "outboxDispatcher: {mutationInterval: 61s}", "outboxDispatcher: {mutationInterval: 1m1ms}"},
	want:    []string{"outboxDispatcher.mutationInterval", "at most 1m"},
	good:    []string{"outboxDispatcher: {mutationInterval: 1m}", "outboxDispatcher: {mutationInterval: 30s30s}", "outboxDispatcher: {mutationInterval: 0s}"},
	target:  "outbox-dispatcher",
	refused: []map[string]string{{"BOARDREADYOPS_DISPATCHER_MUTATION_INTERVAL": "61s"}, {"BOARDREADYOPS_DISPATCHER_MUTATION_INTERVAL": "1m0.001s"}},
}, {
	name:    "ingest.storeTimeout more than 0 and at most 9s",
	bad:     []string{"ingest: {storeTimeout: 0s}", "ingest: {storeTimeout: 10s}", "ingest: {storeTimeout: 9001ms}", "ingest: {storeTimeout: 9.000000001s}"},
	want:    []string{"ingest.storeTimeout", "at most 9s"},
	good:    []string{"ingest: {storeTimeout: 9s}", "ingest: {storeTimeout: 9000ms}", "ingest: {storeTimeout: 8.999999999s}", "ingest: {storeTimeout: 1ns}"},
	target:  "ingest",
	refused: []map[string]string{{"BOARDREADYOPS_INGEST_STORE_TIMEOUT": "0s"}, {"BOARDREADYOPS_INGEST_STORE_TIMEOUT": "9.000000001s"}},
}, {
	name: "ingest.terminationGracePeriodSeconds leaves a shutdown timeout after the preStop sleep",
	bad: []string{"ingest: {terminationGracePeriodSeconds: 10, preStopSleepSeconds: 5}", "ingest: {terminationGracePeriodSeconds: 30, preStopSleepSeconds: 25}",
		"ingest: {terminationGracePeriodSeconds: 10, preStopSleepSeconds: 60}"},
	want: []string{"ingest.terminationGracePeriodSeconds", "ingest.preStopSleepSeconds"},
	good: []string{"ingest: {terminationGracePeriodSeconds: 11, preStopSleepSeconds: 5}", "ingest: {terminationGracePeriodSeconds: 10, preStopSleepSeconds: 0}",
		"ingest: {terminationGracePeriodSeconds: 66, preStopSleepSeconds: 60}"},
	target:  "ingest",
	refused: []map[string]string{{"BOARDREADYOPS_SHUTDOWN_TIMEOUT": "0s"}, {"BOARDREADYOPS_SHUTDOWN_TIMEOUT": "-55s"}},
}, {
	name: "retention.interval at most 24h and retention.lease at most 1h",
	bad: []string{"retention: {interval: 48h}", "retention: {interval: 24h1s}", "retention: {interval: 1441m}",
		"retention: {lease: 2h}", "retention: {lease: 3601s}"},
	want: []string{"retention.", "at most"},
	// Lifecycle checks neither while retention is off.
	good: []string{"retention: {interval: 24h, lease: 1h}", "retention: {interval: 1440m, lease: 3600s}",
		"retention: {enabled: false, interval: 48h, lease: 2h}"},
	target:  "lifecycle",
	refused: []map[string]string{{"BOARDREADYOPS_RETENTION_INTERVAL": "48h"}, {"BOARDREADYOPS_RETENTION_LEASE": "1h0m1s"}},
}, {
	name:    "retention.audit never or at least 8760h",
	bad:     []string{"retention: {audit: 100h}", "retention: {audit: 8759h59m59s}", "retention: {audit: 525599m}"},
	want:    []string{"retention.audit", "8760h"},
	good:    []string{"retention: {audit: 8760h}", "retention: {audit: 525600m}", `retention: {audit: "0"}`},
	target:  "lifecycle",
	refused: []map[string]string{{"BOARDREADYOPS_RETENTION_AUDIT": "100h"}, {"BOARDREADYOPS_RETENTION_AUDIT": "8759h59m59s"}},
}, {
	name: "retention periods never or at least 1s",
	bad: []string{"retention: {effects: 500ms}", "retention: {releaseRuns: 999ms}",
		"retention: {allowShort: true, jobs: 1ms, digests: 1ms}"},
	want:    []string{"retention.", "at least 1s"},
	good:    []string{"retention: {effects: 1s, releaseRuns: 1s}", `retention: {effects: "0", releaseRuns: "0"}`, "retention: {allowShort: true, jobs: 1s, digests: 1s}"},
	target:  "lifecycle",
	refused: []map[string]string{{"BOARDREADYOPS_RETENTION_EFFECTS": "500ms"}, {"BOARDREADYOPS_RETENTION_RELEASE_RUNS": "999ms"}},
}, {
	name: "retention.jobs and retention.digests at least 72h unless allowShort",
	bad: []string{"retention: {jobs: 71h}", "retention: {digests: 71h59m59s}", `retention: {jobs: "0", digests: 24h}`,
		"retention: {jobs: 24h, digests: 720h}"},
	want: []string{"retention.", "72h", "retention.allowShort"},
	good: []string{"retention: {jobs: 72h, digests: 72h}", `retention: {jobs: "0", digests: "0"}`,
		"retention: {allowShort: true, jobs: 1h, digests: 1h}"},
	target:  "lifecycle",
	refused: []map[string]string{{"BOARDREADYOPS_RETENTION_JOBS": "71h"}, {"BOARDREADYOPS_RETENTION_DIGESTS": "71h59m59s"}},
}, {
	name:    "release.workflow at most 200 characters before .yml",
	bad:     []string{"release: {workflow: " + strings.Repeat("w", 201) + ".yml}"},
	want:    []string{"workflow"},
	good:    []string{"release: {workflow: " + strings.Repeat("w", 200) + ".yml}", "release: {workflow: w.yaml}"},
	target:  "lifecycle",
	refused: []map[string]string{{"BOARDREADYOPS_RELEASE_WORKFLOW": strings.Repeat("w", 201) + ".yml"}},
}, {
	// path.Match's own syntax: TestTagPatternSchemaIsPathMatch compares the two exhaustively.
	name:    "release.tagPattern a valid path.Match pattern",
	bad:     []string{"release: {tagPattern: 'v['}", `release: {tagPattern: 'v\'}`, "release: {tagPattern: '[-a]*'}", "release: {tagPattern: '[^]'}"},
	want:    []string{"tagPattern"},
	good:    []string{"release: {tagPattern: 'release-[0-9]*'}", `release: {tagPattern: 'v[^a-z]\*'}`},
	target:  "lifecycle",
	refused: []map[string]string{{"BOARDREADYOPS_RELEASE_TAG_PATTERN": "v["}, {"BOARDREADYOPS_RELEASE_TAG_PATTERN": "[^]"}},
}, {
	name:    "operator.monitor.scrapeInterval between 1s and 10m",
	bad:     []string{"operator: {monitor: {scrapeInterval: 999ms}}", "operator: {monitor: {scrapeInterval: 10m1s}}", "operator: {monitor: {scrapeInterval: 0s}}"},
	want:    []string{"operator.monitor.scrapeInterval", "at most 10m"},
	good:    []string{"operator: {monitor: {scrapeInterval: 1s}}", "operator: {monitor: {scrapeInterval: 10m}}", "operator: {monitor: {create: false, scrapeInterval: 1h}}"},
	target:  "outboxmonitor",
	refused: []map[string]string{{"scrapeInterval": "999ms"}, {"scrapeInterval": "10m1s"}},
}, {
	// The CRD refuses windows of 0s since 6bed8db; the chart's OutboxMonitor is a post-upgrade
	// hook, so such a value would fail helm upgrade after the Deployments rolled.
	name: "operator.monitor.triggers windows more than 0 and at most 24h",
	bad: []string{"operator: {monitor: {triggers: {throughput: {window: 0s}}}}", "operator: {monitor: {triggers: {claimLatency: {window: 0s}}}}",
		`operator: {monitor: {triggers: {oldestAvailableAge: {window: "0"}}}}`, "operator: {monitor: {triggers: {throughput: {window: 24h0m0.000000001s}}}}",
		"operator: {monitor: {triggers: {claimLatency: {window: 1441m}}}}"},
	want: []string{"operator.monitor.triggers.", ".window", "more than 0 and at most 24h"},
	good: []string{"operator: {monitor: {triggers: {claimLatency: {window: 1ns}, oldestAvailableAge: {window: 24h}, throughput: {window: 1440m}}}}",
		"operator: {monitor: {triggers: {throughput: {window: 15m}, clearWindow: 5m}}}", "operator: {monitor: {create: false, triggers: {throughput: {window: 0s}}}}"},
	target: "outboxmonitor",
	refused: []map[string]string{{"triggers.throughput.window": "0s"}, {"triggers.claimLatency.window": "0s"},
		{"triggers.oldestAvailableAge.window": "24h0m0.000000001s"}},
}, {
	name: "operator.monitor.triggers thresholds more than 0 and at most 1h (latency) or 24h (age)",
	bad: []string{"operator: {monitor: {triggers: {claimLatency: {threshold: 0s}}}}", "operator: {monitor: {triggers: {claimLatency: {threshold: 1h0m0.001s}}}}",
		"operator: {monitor: {triggers: {oldestAvailableAge: {threshold: 0ms}}}}", "operator: {monitor: {triggers: {oldestAvailableAge: {threshold: 24h1s}}}}"},
	want: []string{"operator.monitor.triggers.", ".threshold", "more than 0 and at most"},
	good: []string{"operator: {monitor: {triggers: {claimLatency: {threshold: 1h}, oldestAvailableAge: {threshold: 24h}}}}",
		"operator: {monitor: {triggers: {claimLatency: {threshold: 1ns}, oldestAvailableAge: {threshold: 1ns}}}}"},
	target: "outboxmonitor",
	refused: []map[string]string{{"triggers.claimLatency.threshold": "0s"}, {"triggers.claimLatency.threshold": "1h0m0.001s"},
		{"triggers.oldestAvailableAge.threshold": "0ms"}, {"triggers.oldestAvailableAge.threshold": "24h1s"}},
}, {
	name:    "operator.monitor.triggers.clearWindow at most 24h",
	bad:     []string{"operator: {monitor: {triggers: {clearWindow: 24h1s}}}", "operator: {monitor: {triggers: {clearWindow: 1441m}}}"},
	want:    []string{"operator.monitor.triggers.clearWindow", "at most 24h"},
	good:    []string{"operator: {monitor: {triggers: {clearWindow: 24h}}}", "operator: {monitor: {triggers: {clearWindow: 0s}}}"},
	target:  "outboxmonitor",
	refused: []map[string]string{{"triggers.clearWindow": "24h1s"}},
}, {
	name: "operator.monitor.prometheus.rateWindow between 10s and 1h",
	bad: []string{`operator: {monitor: {prometheus: {url: "http://prometheus:9090", selector: 'job="d"', rateWindow: 9s}}}`,
		`operator: {monitor: {prometheus: {url: "http://prometheus:9090", selector: 'job="d"', rateWindow: 1h1s}}}`},
	want: []string{"operator.monitor.prometheus.rateWindow", "at least 10s and at most 1h"},
	good: []string{`operator: {monitor: {prometheus: {url: "http://prometheus:9090", selector: 'job="d"', rateWindow: 10s}}}`,
		`operator: {monitor: {prometheus: {url: "http://prometheus:9090", selector: 'job="d"', rateWindow: 1h}}}`},
	target:  "outboxmonitor",
	refused: []map[string]string{{"prometheus.rateWindow": "9s"}, {"prometheus.rateWindow": "1h0m1s"}},
}, {
	name:    "redeliver.since more than 0 and at most 72h",
	bad:     []string{"redeliver: {enabled: true, since: 73h}", "redeliver: {enabled: true, since: 72h0m1s}", "redeliver: {enabled: true, since: 0s}"},
	want:    []string{"redeliver.since", "at most 72h"},
	good:    []string{"redeliver: {enabled: true, since: 72h}", "redeliver: {enabled: true, since: 1s}", "redeliver: {enabled: false, since: 100h}"},
	target:  "redeliver",
	refused: []map[string]string{{"--since": "73h"}, {"--since": "0s"}},
}}

// TestChartRefusesWhatTheServicesRefuse: every bound of boundRows is the chart's too. Beyond it
// the chart refuses to render, naming the values, instead of installing pods that crash-loop; at
// it the chart renders, and the service (run for real on what the chart rendered) starts.
func TestChartRefusesWhatTheServicesRefuse(t *testing.T) {
	t.Parallel()
	base := readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	var bin string
	if !testing.Short() {
		bin = buildServices(t)
	}
	for _, row := range boundRows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			for _, patch := range row.bad {
				_, err := render(t, patchValues(t, base, patch), "boardreadyops")
				if err == nil {
					t.Errorf("%s: rendered, want the chart to refuse it", patch)
					continue
				}
				for _, w := range row.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %v\nwant an error naming %q", patch, err, w)
					}
				}
			}
			if bin == "" {
				return // -short: the renders only
			}
			for i, patch := range row.good {
				checkTarget(t, bin, row.target, patchValues(t, base, patch), patch, nil)
				if i == 0 {
					for _, over := range row.refused {
						checkTarget(t, bin, row.target, patchValues(t, base, patch), patch, over)
					}
				}
			}
		})
	}
}

func patchValues(t testing.TB, base map[string]any, patch string) map[string]any {
	t.Helper()
	var p map[string]any
	if err := yaml.Unmarshal([]byte(patch), &p); err != nil {
		t.Fatalf("%s: %v", patch, err)
	}
	return merge(deepCopy(base), p)
}

// buildServices builds the service binaries (and brops) of this repository into a directory.
func buildServices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"./services/ingest", "./services/lifecycle", "./services/outbox-dispatcher", "./services/brops")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the services: %v\n%s", err, out)
	}
	return dir
}

// checkTarget renders vals and has the row's target check what it rendered, with the settings
// of over laid over it: with over nil the target must accept them, else refuse them.
func checkTarget(t *testing.T, bin, target string, vals map[string]any, patch string, over map[string]string) {
	t.Helper()
	ns := "boardreadyops"
	var c client.Client
	if target == "outboxmonitor" {
		var err error
		if c, err = client.New(apiServer, client.Options{}); err != nil {
			t.Fatal(err)
		}
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bounds-"}}
		if err := c.Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		ns = n.Name
	}
	out, err := render(t, vals, ns)
	if err != nil {
		t.Errorf("%s: %v, want it rendered", patch, err)
		return
	}
	objs := objectsOf(t, out)
	what := patch
	if over != nil {
		what = fmt.Sprintf("%s with %v", patch, over)
	}
	switch target {
	case "ingest", "lifecycle", "outbox-dispatcher":
		dep := find(t, objs, "Deployment", "brops-boardreadyops-"+target).typed.(*appsv1.Deployment)
		env := containerEnv(dep.Spec.Template.Spec.Containers[0])
		for k, v := range over {
			if _, ok := env[k]; !ok {
				t.Fatalf("%s: the chart renders no %s into %s", what, k, target)
			}
			env[k] = v
		}
		checkRun(t, what, over, filepath.Join(bin, target), nil, env)
	case "redeliver":
		var args []string
		env := map[string]string{}
		for _, o := range objs {
			if cj, ok := o.typed.(*batchv1.CronJob); ok {
				ctr := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
				args, env = slices.Clone(ctr.Args), containerEnv(ctr)
			}
		}
		if args == nil && over == nil {
			return // not rendered: nothing runs
		}
		for name, v := range over {
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, name+"=") })
			if i < 0 {
				t.Fatalf("%s: the CronJob has no %s argument", what, name)
			}
			args[i] = name + "=" + v
		}
		checkRun(t, what, over, filepath.Join(bin, "brops"), args, env)
	case "outboxmonitor":
		found := false
		for _, o := range objs {
			if o.u.GetKind() != "OutboxMonitor" {
				continue
			}
			found = true
			u := o.u.DeepCopy()
			for k, v := range over {
				if err := unstructured.SetNestedField(u.Object, v, append([]string{"spec"}, strings.Split(k, ".")...)...); err != nil {
					t.Fatal(err)
				}
			}
			err := c.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict"))
			switch {
			case over == nil && err != nil:
				t.Errorf("%s: the API server refuses the OutboxMonitor: %v", what, err)
			case over != nil && err == nil:
				t.Errorf("%s: the API server accepts the OutboxMonitor, so the chart need not refuse it", what)
			case over != nil && !slices.ContainsFunc(slices.Collect(maps.Keys(over)), func(k string) bool { return strings.Contains(err.Error(), "spec."+k+":") }):
				t.Errorf("%s: the API server refuses the OutboxMonitor for another reason: %v", what, err)
			}
		}
		if !found && over != nil {
			t.Fatalf("%s: no OutboxMonitor rendered", what)
		}
	default:
		t.Fatalf("unknown target %q", target)
	}
}

// containerEnv is a container's environment as the process sees it; values from Secrets are
// replaced by a database URL the service cannot parse, so that a service that accepted its
// configuration stops right after, at opening the pool, without a database.
func containerEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = "::not-a-database-url::"
			continue
		}
		env[e.Name] = e.Value
	}
	return env
}

// checkRun runs a binary with args and env. With over nil it must get past its configuration to
// the database or the private key, which the tests do not provide (exit 1); else it must refuse
// its configuration (exit 2, the daemons' and brops's usage error), naming a setting of over.
func checkRun(t *testing.T, what string, over map[string]string, bin string, args []string, env map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("%s: run %s: %v (want it to exit 1 or 2)\n%s", what, filepath.Base(bin), err, stderr.String())
	}
	refused := exit.ExitCode() == 2
	if exit.ExitCode() != 1 && !refused {
		t.Fatalf("%s: %s exited %d, want 1 or 2\n%s", what, filepath.Base(bin), exit.ExitCode(), stderr.String())
	}
	switch {
	case over != nil && !refused:
		t.Errorf("%s: %s accepts it, so the chart need not refuse it:\n%s", what, filepath.Base(bin), stderr.String())
	case over == nil && refused:
		t.Errorf("%s: %s refuses what the chart rendered:\n%s", what, filepath.Base(bin), stderr.String())
	case refused && !slices.ContainsFunc(slices.Collect(maps.Keys(over)), func(k string) bool { return strings.Contains(stderr.String(), k) }):
		t.Errorf("%s: %s refuses it for another reason:\n%s", what, filepath.Base(bin), stderr.String())
	}
}

// TestDurationHelperParsesAsGo: boardreadyops.durationNs reads a duration as time.ParseDuration
// does, to the nanosecond, and fails where Go fails with overflow.
func TestDurationHelperParsesAsGo(t *testing.T) {
	t.Parallel()
	var helpers *common.File
	for _, f := range loadChart(t).Templates {
		if f.Name == "templates/_helpers.tpl" {
			helpers = f
		}
	}
	if helpers == nil {
		t.Fatal("no templates/_helpers.tpl")
	}
	for _, in := range []string{
		"0", "0s", "1ns", "1us", "1µs", "1μs", "1ms", "1s", "1m", "1h", "010s", "00h", "1h30m", "30s30s", "1m0.001s",
		"1.5h", "0.1s", "8.999999999s", "9.000000001s", "1.0000000000000000001s", "0.333333333333h", "2.5us", "1.9ns",
		"525600m", "8760h", "72h", "2562047h", "2562047h47m16.854775807s", "9223372036854775807ns", "9223372036.854775807s",
		"2562047h47m16.854775808s", "9223372036854775808ns", "2562048h", "99999999999999999999ns", "2562047h2562047h",
		"5", "-5s", "5d", "1.s", ".5s", "",
	} {
		c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "durations", Version: "0.1.0"},
			Templates: []*common.File{helpers, {Name: "templates/out.yaml",
				Data: []byte(`{{ include "boardreadyops.durationNs" (dict "name" "x" "value" .Values.in) }}`)}}}
		out, err := engine.Render(c, common.Values{"Values": map[string]any{"in": in}})
		want, werr := time.ParseDuration(in)
		if in == "0" {
			want, werr = 0, nil
		}
		if strings.HasPrefix(in, "-") || in == "1.s" || in == ".5s" {
			// Go accepts these; no schema pattern of the chart does, and the helper refuses them.
			werr = errors.New("not in the chart's patterns")
		}
		switch {
		case werr != nil && err == nil:
			t.Errorf("%q: helper %s, want an error (Go: %v)", in, out["durations/templates/out.yaml"], werr)
		case werr == nil && err != nil:
			t.Errorf("%q: helper: %v, want %d", in, err, want)
		case werr == nil && out["durations/templates/out.yaml"] != fmt.Sprint(int64(want)):
			t.Errorf("%q: helper %s, want %d", in, out["durations/templates/out.yaml"], int64(want))
		}
	}
}

// The schema's release.tagPattern pattern accepts exactly what lifecycle's path.Match accepts:
// every pattern of up to 5 characters over path.Match's metacharacters and two letters, one
// reading the other's way of escaping, ranges and negation. (Helm checks the schema's patterns
// with Go's regexp, as here.)
func TestTagPatternSchemaIsPathMatch(t *testing.T) {
	t.Parallel()
	var schema struct {
		Properties struct {
			Release struct {
				Properties struct {
					TagPattern struct {
						Pattern string `json:"pattern"`
					} `json:"tagPattern"`
				} `json:"properties"`
			} `json:"release"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(chartDir, "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(schema.Properties.Release.Properties.TagPattern.Pattern)
	alphabet := []byte(`v1*?[]^-\`)
	checked, wrong := 0, 0
	var walk func(p []byte)
	walk = func(p []byte) {
		if len(p) > 0 {
			checked++
			_, err := path.Match(string(p), "v1.0.0")
			if valid, accepted := err == nil, re.MatchString(string(p)); valid != accepted {
				if wrong++; wrong <= 10 {
					t.Errorf("pattern %q: path.Match valid %v, schema accepts %v", p, valid, accepted)
				}
			}
		}
		if len(p) == 5 {
			return
		}
		for _, c := range alphabet {
			walk(append(p, c))
		}
	}
	walk(nil)
	if wrong > 0 {
		t.Fatalf("%d of %d patterns judged otherwise", wrong, checked)
	}
}
