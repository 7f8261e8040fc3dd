package charttest

import (
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// generatedCRD is the file make generate writes from the operator's Go types.
var generatedCRD = filepath.Join(chartDir, "files", "crds", "boardreadyops.io_outboxmonitors.yaml")

// TestCRDIsTheGeneratedOne: the chart renders the CRD controller-gen generated, unchanged but for
// its labels and the keep annotation; crds.keep=false drops the annotation and crds.enabled=false
// renders no CRD at all (another release or the cluster's administrator owns it).
func TestCRDIsTheGeneratedOne(t *testing.T) {
	t.Parallel()
	var file map[string]any
	if err := yaml.Unmarshal(readFile(t, generatedCRD), &file); err != nil {
		t.Fatal(err)
	}
	base := readValues(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	tests := []struct {
		name     string
		crds     map[string]any
		rendered bool
		keep     bool
	}{
		{"defaults", nil, true, true},
		{"keep off", map[string]any{"keep": false}, true, false},
		{"disabled", map[string]any{"enabled": false}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vals := deepCopy(base)
			if tt.crds != nil {
				vals = merge(vals, map[string]any{"crds": tt.crds})
			}
			out, err := render(t, vals, "boardreadyops")
			if err != nil {
				t.Fatal(err)
			}
			var crds []object
			for _, o := range objectsOf(t, out) {
				if o.u.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				}
			}
			if !tt.rendered {
				if len(crds) != 0 {
					t.Fatalf("%d CRDs rendered with %v", len(crds), tt.crds)
				}
				return
			}
			if len(crds) != 1 {
				t.Fatalf("%d CRDs rendered, want 1", len(crds))
			}
			crd := crds[0].u
			if crd.GetName() != "outboxmonitors.boardreadyops.io" || crd.GetNamespace() != "" {
				t.Errorf("rendered CRD %q in namespace %q", crd.GetName(), crd.GetNamespace())
			}
			if got := crd.Object["spec"]; !reflect.DeepEqual(normalize(t, got), normalize(t, file["spec"])) {
				t.Error("the rendered CRD's spec differs from the generated file's")
			}
			a := crd.GetAnnotations()
			if got := a["helm.sh/resource-policy"] == "keep"; got != tt.keep {
				t.Errorf("annotations %v: keep = %v, want %v", a, got, tt.keep)
			}
			if a["controller-gen.kubebuilder.io/version"] == "" {
				t.Errorf("annotations %v: the generator's annotation is gone", a)
			}
			if l := crd.GetLabels(); l["app.kubernetes.io/instance"] != releaseName || l["app.kubernetes.io/part-of"] != "boardreadyops" {
				t.Errorf("labels %v: want the release's", l)
			}
		})
	}
}
