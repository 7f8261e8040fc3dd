// Package controller holds the OutboxMonitor reconciler: every scrape interval it scrapes the
// watched dispatcher's pods, folds the figures into the broker-transition triggers and reports
// them on the monitor's status, as Events and as metrics. It only reads the dispatcher; it never
// changes it.
package controller

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/boardreadyops/cloud/services/operator/api/v1alpha1"
	"github.com/boardreadyops/cloud/services/operator/internal/broker"
	"github.com/boardreadyops/cloud/services/operator/internal/scrape"
	"github.com/boardreadyops/cloud/services/operator/internal/trigger"
)

// The operator's permissions, generated into the chart's Role by `make generate`. It reads its
// monitors, the dispatcher Deployment and pods, writes monitor status, Events and its leader
// election Lease, and patches a monitor's owner references (ownByDispatcher) — nothing else.
// Leader election (client-go's LeaseLock) gets, creates and updates one Lease, named by
// app.RunManager's LeaderElectionID: every verb but create names it, so that the operator cannot
// read or take over another component's Lease (RBAC cannot limit create to a name: the request
// carries none). internal/app's TestRunManager runs the manager with this Role.
//
// +kubebuilder:rbac:groups=boardreadyops.io,namespace=boardreadyops,resources=outboxmonitors,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=boardreadyops.io,namespace=boardreadyops,resources=outboxmonitors/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,namespace=boardreadyops,resources=deployments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=boardreadyops,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=boardreadyops,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=boardreadyops,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=boardreadyops,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=boardreadyops,resources=leases,resourceNames=boardreadyops-operator.boardreadyops.io,verbs=get;update

// maxScrapeErrors bounds status.scrapeErrors (the CRD's maxItems).
const maxScrapeErrors = 10

// maxConcurrentScrapes bounds the pods scraped at once per monitor.
const maxConcurrentScrapes = 8

// Reconciler reconciles OutboxMonitors.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// HTTP scrapes the pods; its timeout is a backstop, each scrape is bounded by ScrapeTimeout.
	HTTP          *http.Client
	ScrapeTimeout time.Duration
	// Metrics is required (NewMetrics).
	Metrics *Metrics
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu        sync.Mutex
	monitors  map[types.NamespacedName]*monitorState
	snapshots map[types.NamespacedName]snapshot
}

// monitorState is the in-memory history of one monitor: the scrape aggregator and trigger
// windows. It is rebuilt from the status conditions after a restart or leader change (fired
// triggers stay fired; pending windows start again).
type monitorState struct {
	mu sync.Mutex
	// uid identifies the object the history belongs to. A monitor deleted and created again
	// under its name (Helm replaces the chart's hook on every upgrade) is a new object whose
	// history starts again, even when no reconcile saw the name missing in between.
	uid        types.UID
	eval       *broker.Evaluator
	lastScrape time.Time
}

// SetupWithManager registers the reconciler. Only spec changes (generation) and creation wake
// it; otherwise it runs on its own scrape interval, so its status writes do not feed back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.OutboxMonitor{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("outboxmonitor").
		Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile runs one scrape-and-evaluate round for a monitor when its interval has passed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var mon v1alpha1.OutboxMonitor
	if err := r.Client.Get(ctx, req.NamespacedName, &mon); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get outboxmonitor: %w", err)
	}
	interval := 15 * time.Second
	if d := mon.Spec.ScrapeInterval; d != nil && d.Duration > 0 {
		interval = d.Duration
	}
	if err := r.ownByDispatcher(ctx, &mon); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	st := r.state(req.NamespacedName, &mon)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := r.now()
	if wait := st.lastScrape.Add(interval).Sub(now); !st.lastScrape.IsZero() && wait > 0 && mon.Status.ObservedGeneration == mon.Generation {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	prevRound := st.lastScrape
	st.lastScrape = now

	settings := broker.SettingsFromSpec(mon.Spec)
	workers := r.workers(ctx, &mon)
	var res broker.Result
	var scrapeErrs []string
	if p := mon.Spec.Prometheus; p != nil {
		var sig scrape.Signals
		sig, scrapeErrs = r.queryPrometheus(ctx, p, settings, prevRound, now, interval, workers.reason == reasonScaledToZero)
		res = st.eval.EvaluateSignals(settings, sig, workers.healthy)
	} else {
		var samples map[string]scrape.Sample
		var alive map[string]bool
		samples, alive, scrapeErrs = r.scrapePods(ctx, &mon, workers.selector, interval)
		res = st.eval.Evaluate(settings, now, samples, alive, workers.healthy)
	}
	if workers.err != "" {
		scrapeErrs = append([]string{workers.err}, scrapeErrs...)
	}
	wasRecommended := meta.IsStatusConditionTrue(mon.Status.Conditions, v1alpha1.ConditionBrokerEvaluationRecommended)
	rec := broker.Recommend(st.eval.Active(), mon.Spec.Tuning != nil)

	patchBase := client.MergeFrom(mon.DeepCopy())
	r.setStatus(&mon, st.eval, settings, res, rec, workers, scrapeErrs, now)
	if err := r.Client.Status().Patch(ctx, &mon, patchBase); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("update outboxmonitor status: %w", err)
	}
	r.emitEvents(&mon, st.eval, settings, res, rec, wasRecommended)
	snap := snapshot{recommended: rec.Recommended}
	for _, t := range broker.Triggers {
		snap.active[t] = st.eval.States[t].Active
	}
	r.publishMetrics(req.NamespacedName, &snap)
	return ctrl.Result{RequeueAfter: interval}, nil
}

// state returns the monitor's history, creating it from the stored status when this process has
// none for this object (first sight, restart, new leader, the name re-created).
func (r *Reconciler) state(key types.NamespacedName, mon *v1alpha1.OutboxMonitor) *monitorState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.monitors == nil {
		r.monitors = map[types.NamespacedName]*monitorState{}
	}
	st, ok := r.monitors[key]
	if !ok || st.uid != mon.UID {
		st = &monitorState{uid: mon.UID, eval: broker.NewEvaluator()}
		for _, t := range broker.Triggers {
			if c := meta.FindStatusCondition(mon.Status.Conditions, t.ConditionType()); c != nil && c.Status == metav1.ConditionTrue {
				st.eval.States[t] = trigger.State{Active: true, Since: c.LastTransitionTime.Time}
			}
		}
		r.monitors[key] = st
	}
	return st
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.monitors, key)
	r.mu.Unlock()
	r.publishMetrics(key, nil)
}

// reasonScaledToZero is the WorkersHealthy reason of a dispatcher Deployment scaled to zero
// replicas (the restore runbook scales every service to zero; an operator may stop it): no pod
// exports a series then, and none is expected.
const reasonScaledToZero = "ScaledToZero"

// workerStatus is the dispatcher Deployment's health and the selector of its pods.
type workerStatus struct {
	healthy         bool
	reason, message string
	ready, desired  int32
	selector        labels.Selector
	err             string
}

func (r *Reconciler) workers(ctx context.Context, mon *v1alpha1.OutboxMonitor) workerStatus {
	var ws workerStatus
	var dep appsv1.Deployment
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: mon.Namespace, Name: mon.Spec.Dispatcher.DeploymentName}, &dep)
	switch {
	case apierrors.IsNotFound(err):
		ws.reason, ws.message = "DeploymentNotFound", fmt.Sprintf("deployment %q not found", mon.Spec.Dispatcher.DeploymentName)
		ws.err = ws.message
	case err != nil:
		ws.reason, ws.message = "DeploymentUnreadable", fmt.Sprintf("read deployment %q: %v", mon.Spec.Dispatcher.DeploymentName, err)
		ws.err = ws.message
	default:
		ws.desired = 1
		if dep.Spec.Replicas != nil {
			ws.desired = *dep.Spec.Replicas
		}
		ws.ready = dep.Status.AvailableReplicas
		switch {
		case ws.desired == 0:
			ws.reason, ws.message = reasonScaledToZero, "the dispatcher deployment is scaled to zero replicas"
		case ws.ready < ws.desired:
			ws.reason, ws.message = "ReplicasUnavailable", fmt.Sprintf("%d of %d dispatcher replicas available", ws.ready, ws.desired)
		default:
			ws.healthy = true
			ws.reason, ws.message = "AllReplicasAvailable", fmt.Sprintf("%d of %d dispatcher replicas available", ws.ready, ws.desired)
		}
		if dep.Spec.Selector != nil {
			if sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err == nil {
				ws.selector = sel
			}
		}
	}
	if ps := mon.Spec.Dispatcher.PodSelector; ps != nil {
		sel, err := metav1.LabelSelectorAsSelector(ps)
		if err != nil {
			ws.err = fmt.Sprintf("spec.dispatcher.podSelector: %v", err)
			ws.selector = nil
		} else {
			ws.selector = sel
		}
	}
	return ws
}

// scrapePods scrapes every running pod the selector matches. It returns the samples keyed by pod
// UID, the UIDs of every matching pod (answered or not) and one error line per failed pod.
func (r *Reconciler) scrapePods(ctx context.Context, mon *v1alpha1.OutboxMonitor, sel labels.Selector, interval time.Duration) (map[string]scrape.Sample, map[string]bool, []string) {
	alive := map[string]bool{}
	if sel == nil || sel.Empty() {
		return nil, alive, []string{"no pod selector: the deployment has none and spec.dispatcher.podSelector is unset or invalid"}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(mon.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, alive, []string{fmt.Sprintf("list pods: %v", err)}
	}
	timeout := r.ScrapeTimeout
	if timeout <= 0 || timeout > interval/2 {
		timeout = interval / 2
	}
	type result struct {
		uid    string
		sample scrape.Sample
		err    error
	}
	var targets []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		alive[string(p.UID)] = true
		targets = append(targets, p)
	}
	results := make(chan result, len(targets))
	sem := make(chan struct{}, maxConcurrentScrapes)
	start := r.now()
	var wg sync.WaitGroup
	for _, p := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			url, err := metricsURL(&p, mon.Spec.Dispatcher)
			if err != nil {
				results <- result{uid: string(p.UID), err: fmt.Errorf("pod %s: %w", p.Name, err)}
				return
			}
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			s, err := scrape.Fetch(sctx, r.HTTP, url, r.now())
			if err != nil {
				err = fmt.Errorf("pod %s: %w", p.Name, err)
			}
			results <- result{uid: string(p.UID), sample: s, err: err}
		}()
	}
	wg.Wait()
	close(results)
	r.Metrics.scrapeSeconds.Observe(r.now().Sub(start).Seconds())
	samples := map[string]scrape.Sample{}
	var errs []string
	for res := range results {
		if res.err != nil {
			r.Metrics.scrapes.WithLabelValues("failure").Inc()
			errs = append(errs, res.err.Error())
			continue
		}
		r.Metrics.scrapes.WithLabelValues("success").Inc()
		samples[res.uid] = res.sample
	}
	sort.Strings(errs)
	if len(targets) == 0 {
		errs = append(errs, "no running dispatcher pod matches the selector")
	}
	return samples, alive, errs
}

// metricsURL resolves the pod's metrics endpoint: its IP and the named or numbered port.
func metricsURL(p *corev1.Pod, d v1alpha1.DispatcherTarget) (string, error) {
	if p.Status.PodIP == "" {
		return "", fmt.Errorf("no pod IP yet")
	}
	port := 0
	mp := intstr.FromString("metrics")
	if d.MetricsPort != nil {
		mp = *d.MetricsPort
	}
	switch mp.Type {
	case intstr.Int:
		port = int(mp.IntVal)
	default:
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == mp.StrVal {
					port = int(cp.ContainerPort)
				}
			}
		}
		if port == 0 {
			return "", fmt.Errorf("no container port named %q", mp.StrVal)
		}
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("metrics port %d out of range", port)
	}
	path := d.MetricsPath
	if path == "" {
		path = "/metrics"
	}
	return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)) + path, nil
}
