package charttest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/boardreadyops/cloud/pkg/testkit/envtestassets"
)

const crdName = "outboxmonitors.boardreadyops.io"

// TestCRDUpgradesWithTheChart runs Helm's own install, upgrade and uninstall actions against a
// kube-apiserver of its own (envtest; the shared one serves the CRD without Helm's ownership), the
// way `helm install` without --wait does:
//   - a first install creates the CRD and then, as a post-install hook, the release's OutboxMonitor;
//   - an upgrade to a chart whose CRD has a new field and printer column (a release that changed
//     the operator's types) changes the served CRD: an OutboxMonitor using the field is accepted
//     under strict field validation, where before the upgrade it was refused;
//   - helm uninstall keeps the CRD (helm.sh/resource-policy: keep);
//   - a release of the chart as it was before (the CRD in crds/, which Helm installs without
//     ownership, and the OutboxMonitor a release object) upgrades to this chart once the upgrade
//     takes ownership of the CRD; without, Helm names the conflict (docs/upgrading.md, "The CRD").
func TestCRDUpgradesWithTheChart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	assets, err := envtestassets.Dir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if _, err := env.Start(); err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	helm := newHelm(t, env, c, "boardreadyops")
	// Migrations off: envtest runs no Job controller, so the hook Job would never complete.
	vals := merge(readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml")),
		map[string]any{"migrations": map[string]any{"enabled": false}})

	// First install: CRD and hook OutboxMonitor.
	helm.install(t, ctx, loadChart(t), vals)
	crd := servedCRD(t, ctx, c)
	if crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.Annotations["meta.helm.sh/release-name"] != releaseName {
		t.Fatalf("installed CRD's annotations %v: want keep and the release's", crd.Annotations)
	}
	helm.monitorExists(t, ctx)
	if err := helm.createNoted(ctx); err == nil || !strings.Contains(err.Error(), "note") {
		t.Fatalf("an OutboxMonitor with spec.note before the upgrade: %v, want a strict field validation error", err)
	}

	// Upgrade to a chart with a changed CRD.
	helm.upgrade(t, ctx, chartWithNote(t), vals, false)
	crd = servedCRD(t, ctx, c)
	cols := crd.Spec.Versions[0].AdditionalPrinterColumns
	if !slices.ContainsFunc(cols, func(c apiextensionsv1.CustomResourceColumnDefinition) bool { return c.Name == "Note" }) {
		t.Fatalf("served CRD's printer columns after the upgrade: %+v, want Note", cols)
	}
	if err := helm.createNoted(ctx); err != nil {
		t.Fatalf("an OutboxMonitor with spec.note after the upgrade: %v", err)
	}
	helm.monitorExists(t, ctx)

	// Uninstall keeps the CRD.
	un := action.NewUninstall(helm.cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	if _, err := un.Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	crd = servedCRD(t, ctx, c)

	// The chart as it was before the CRD became a template (crds/, the OutboxMonitor a release
	// object): Helm installs its CRD without ownership, so the upgrade that brings the template
	// stops until it takes ownership. The CRD the uninstall kept goes first, as on a cluster
	// that never ran this chart version.
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, c, crd)
	helm.install(t, ctx, chartWithCRDsDir(t), vals)
	crd = servedCRD(t, ctx, c)
	if _, owned := crd.Annotations["meta.helm.sh/release-name"]; owned {
		t.Fatalf("the crds/ chart's CRD has Helm ownership: %v", crd.Annotations)
	}
	helm.monitorExists(t, ctx)
	err = helm.upgradeErr(ctx, loadChart(t), vals, false)
	if err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
		t.Fatalf("upgrade over the crds/ chart's CRD: %v, want Helm's ownership conflict", err)
	}
	helm.upgrade(t, ctx, loadChart(t), vals, true)
	crd = servedCRD(t, ctx, c)
	if crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.Annotations["meta.helm.sh/release-name"] != releaseName ||
		crd.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Fatalf("adopted CRD: annotations %v, labels %v", crd.Annotations, crd.Labels)
	}
	// The upgrade deleted the monitor as a release object and created it as the hook.
	if m := helm.monitorExists(t, ctx); m.GetAnnotations()["helm.sh/hook"] != "post-install,post-upgrade" {
		t.Fatalf("the OutboxMonitor after the upgrade from crds/: annotations %v, want the hook's", m.GetAnnotations())
	}
}

// releaseHelm drives Helm's actions for one release namespace.
type releaseHelm struct {
	cfg       *action.Configuration
	c         client.Client
	namespace string
}

func newHelm(t *testing.T, env *envtest.Environment, c client.Client, namespace string) *releaseHelm {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &path, &namespace
	cfg := new(action.Configuration)
	cfg.SetLogger(slog.New(slog.DiscardHandler).Handler())
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return &releaseHelm{cfg: cfg, c: c, namespace: namespace}
}

// install is `helm install` with the CLI's default wait strategy (hooks only).
func (h *releaseHelm) install(t *testing.T, ctx context.Context, ch *chart.Chart, vals map[string]any) {
	t.Helper()
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace = releaseName, h.namespace
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, time.Minute
	if _, err := in.RunWithContext(ctx, ch, vals); err != nil {
		t.Fatalf("helm install: %v", err)
	}
}

func (h *releaseHelm) upgrade(t *testing.T, ctx context.Context, ch *chart.Chart, vals map[string]any, takeOwnership bool) {
	t.Helper()
	if err := h.upgradeErr(ctx, ch, vals, takeOwnership); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
}

func (h *releaseHelm) upgradeErr(ctx context.Context, ch *chart.Chart, vals map[string]any, takeOwnership bool) error {
	up := action.NewUpgrade(h.cfg)
	up.Namespace, up.TakeOwnership = h.namespace, takeOwnership
	up.WaitStrategy, up.Timeout = kube.HookOnlyStrategy, time.Minute
	_, err := up.RunWithContext(ctx, releaseName, ch, vals)
	return err
}

// monitorExists returns the release's OutboxMonitor, failing when it is not there.
func (h *releaseHelm) monitorExists(t *testing.T, ctx context.Context) *unstructured.Unstructured {
	t.Helper()
	m := &unstructured.Unstructured{}
	m.SetAPIVersion("boardreadyops.io/v1alpha1")
	m.SetKind("OutboxMonitor")
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.namespace, Name: releaseName + "-boardreadyops-outbox-dispatcher"}, m); err != nil {
		t.Fatalf("the release's OutboxMonitor: %v", err)
	}
	return m
}

// createNoted creates (dry run, strict field validation) an OutboxMonitor that sets spec.note,
// the field chartWithNote adds.
func (h *releaseHelm) createNoted(ctx context.Context) error {
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "boardreadyops.io/v1alpha1", "kind": "OutboxMonitor",
		"metadata": map[string]any{"name": "noted", "namespace": h.namespace},
		"spec":     map[string]any{"dispatcher": map[string]any{"deploymentName": "d"}, "note": "added by the upgrade"},
	}}
	return h.c.Create(ctx, m, client.DryRunAll, client.FieldValidation("Strict"))
}

func servedCRD(t *testing.T, ctx context.Context, c client.Client) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatalf("served CRD: %v", err)
	}
	return crd
}

// chartWithNote is the chart with a CRD that has one more spec field, spec.note, and a printer
// column showing it: what a chart release that changed the operator's types brings.
func chartWithNote(t *testing.T) *chart.Chart {
	t.Helper()
	ch := loadChart(t)
	for _, f := range ch.Files {
		if f.Name != "files/crds/boardreadyops.io_outboxmonitors.yaml" {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(f.Data, &crd); err != nil {
			t.Fatal(err)
		}
		v := &crd.Spec.Versions[0]
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Properties["note"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
		v.AdditionalPrinterColumns = append(v.AdditionalPrinterColumns,
			apiextensionsv1.CustomResourceColumnDefinition{Name: "Note", Type: "string", JSONPath: ".spec.note"})
		b, err := yaml.Marshal(&crd)
		if err != nil {
			t.Fatal(err)
		}
		f.Data = b
		return ch
	}
	t.Fatal("the chart holds no files/crds/boardreadyops.io_outboxmonitors.yaml")
	return nil
}

// chartWithCRDsDir is the chart as it was before the CRD became a template: the generated CRD in
// crds/ and the OutboxMonitor a release object, not a hook.
func chartWithCRDsDir(t *testing.T) *chart.Chart {
	t.Helper()
	ch := loadChart(t)
	i := slices.IndexFunc(ch.Files, func(f *common.File) bool { return f.Name == "files/crds/boardreadyops.io_outboxmonitors.yaml" })
	if i < 0 {
		t.Fatal("the chart holds no generated CRD")
	}
	ch.Files = append(ch.Files, &common.File{Name: "crds/boardreadyops.io_outboxmonitors.yaml", Data: ch.Files[i].Data})
	ch.Templates = slices.DeleteFunc(ch.Templates, func(f *common.File) bool { return f.Name == "templates/operator-crd.yaml" })
	for _, f := range ch.Templates {
		if f.Name != "templates/operator-outboxmonitor.yaml" {
			continue
		}
		var kept []string
		for _, l := range strings.Split(string(f.Data), "\n") {
			if strings.TrimSpace(l) != "annotations:" && !strings.Contains(l, "helm.sh/hook") && !strings.Contains(l, "delete-with-dispatcher") {
				kept = append(kept, l)
			}
		}
		f.Data = []byte(strings.Join(kept, "\n"))
		return ch
	}
	t.Fatal("the chart holds no templates/operator-outboxmonitor.yaml")
	return nil
}

// waitGone waits until the API server no longer serves obj (a CRD's deletion waits for its
// objects' cleanup).
func waitGone(t *testing.T, ctx context.Context, c client.Client, obj client.Object) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there after a minute: %v", obj.GetName(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
