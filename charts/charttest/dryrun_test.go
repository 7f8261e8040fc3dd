package charttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/boardreadyops/cloud/pkg/testkit/envtestassets"
)

// apiServer is the envtest kube-apiserver shared by the dry-run tests.
var apiServer *rest.Config

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	assets, err := envtestassets.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		// The chart's own CRD (as generated; the chart renders it with its labels and the keep
		// annotation) and the Prometheus Operator's ServiceMonitor and PrometheusRule.
		CRDDirectoryPaths:     []string{filepath.Join(chartDir, "files", "crds"), filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	apiServer, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	return m.Run()
}

// TestServerSideDryRun creates every rendered object of every value set with dryRun=All and
// strict field validation: the API server applies its defaulting, validation (including the
// CRDs' schemas and CEL rules) and admission, and rejects unknown or duplicate fields.
func TestServerSideDryRun(t *testing.T) {
	t.Parallel()
	c, err := client.New(apiServer, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range valueSets(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chart-"}}
			if err := c.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			objs := renderObjects(t, file, ns.Name)
			for _, o := range objs {
				if o.u.GetKind() == "CustomResourceDefinition" {
					// Cluster-scoped and already served (TestMain installed it): replaced, as an
					// upgrade replaces it.
					live := &unstructured.Unstructured{}
					live.SetGroupVersionKind(o.u.GroupVersionKind())
					if err := c.Get(ctx, client.ObjectKeyFromObject(o.u), live); err != nil {
						t.Fatalf("%s: %v", o, err)
					}
					u := o.u.DeepCopy()
					u.SetResourceVersion(live.GetResourceVersion())
					if err := c.Update(ctx, u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
						t.Errorf("%s: server-side dry run: %v", o, err)
					}
					continue
				}
				if o.u.GetNamespace() != ns.Name {
					t.Errorf("%s: namespace %q, want the release namespace %q", o, o.u.GetNamespace(), ns.Name)
				}
				if err := c.Create(ctx, o.u.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict")); err != nil {
					t.Errorf("%s: server-side dry run: %v", o, err)
				}
			}
		})
	}
}
