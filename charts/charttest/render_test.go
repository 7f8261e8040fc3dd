package charttest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
var chartDir = filepath.Join("..", "boardreadyops")

const (
	releaseName = "brops"
	kubeVersion = "v1.37.2"
)

// valueSets are the chart's ci/ value files: each must lint, render and pass a server-side dry run.
func valueSets(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("value sets in %s/ci: %v (%d found)", chartDir, err, len(files))
	}
	return files
}

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

func readValues(t testing.TB, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := common.ReadValuesFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return v
}

// render renders the chart as `helm install` would (schema validation included) and returns the
// manifests by template name.
func render(t testing.TB, vals map[string]any, namespace string, extraAPIs ...string) (map[string]string, error) {
	t.Helper()
	return renderWith(t, nil, vals, namespace, extraAPIs...)
}

// renderWith renders like render; with a cluster, the templates' lookup calls read from it.
func renderWith(t testing.TB, cluster *rest.Config, vals map[string]any, namespace string, extraAPIs ...string) (map[string]string, error) {
	t.Helper()
	return renderRelease(t, cluster, releaseName, vals, namespace, extraAPIs...)
}

// renderRelease renders like renderWith, as the release named release.
func renderRelease(t testing.TB, cluster *rest.Config, release string, vals map[string]any, namespace string, extraAPIs ...string) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	caps := common.DefaultCapabilities.Copy()
	caps.APIVersions = append(append(common.VersionSet{}, caps.APIVersions...), extraAPIs...)
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	opts := common.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := util.ToRenderValuesWithSchemaValidation(c, vals, opts, caps, false)
	if err != nil {
		return nil, err
	}
	if cluster != nil {
		return engine.RenderWithClient(c, rv, cluster)
	}
	return engine.Render(c, rv)
}

// object is one rendered manifest.
type object struct {
	template string
	u        *unstructured.Unstructured
	// typed is the strictly decoded object for kinds client-go knows; nil for custom resources.
	typed runtime.Object
}

func (o object) String() string {
	return fmt.Sprintf("%s %s (%s)", o.u.GetKind(), o.u.GetName(), o.template)
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// strictDecoder fails on unknown and duplicate fields.
var strictDecoder = serializer.NewCodecFactory(clientgoscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// renderObjects renders a value set and decodes every object: strictly into its client-go type
// when it has one, and always into unstructured form for the API server.
func renderObjects(t testing.TB, valuesFile, namespace string) []object {
	t.Helper()
	out, err := render(t, readValues(t, valuesFile), namespace)
	if err != nil {
		t.Fatalf("render %s: %v", valuesFile, err)
	}
	return objectsOf(t, out)
}

// objectsOf decodes rendered manifests (by template name) as renderObjects does.
func objectsOf(t testing.TB, out map[string]string) []object {
	t.Helper()
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []object
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range docSeparator.Split(out[name], -1) {
			if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
				continue
			}
			jsonDoc, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				t.Fatalf("%s: not YAML: %v\n%s", name, err, doc)
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(jsonDoc); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			o := object{template: name, u: u}
			typed, _, err := strictDecoder.Decode(jsonDoc, nil, nil)
			switch {
			case runtime.IsNotRegisteredError(err):
				// A custom resource: validated by the API server's dry run.
			case err != nil:
				t.Fatalf("%s: strict decoding: %v\n%s", o, err, doc)
			default:
				o.typed = typed
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func kinds(objs []object) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		m[o.u.GetKind()]++
	}
	return m
}

func find(t testing.TB, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.u.GetKind() == kind && o.u.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return object{}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
