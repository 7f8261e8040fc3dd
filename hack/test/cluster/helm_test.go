//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

const (
	releaseName = "brops"
	namespace   = "boardreadyops"
	prefix      = releaseName + "-boardreadyops-"
)

// helmConfig is Helm's action configuration for the release namespace.
func helmConfig(t *testing.T, kubeconfig string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := namespace
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	cfg.SetLogger(slog.New(slog.DiscardHandler).Handler())
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// helmInstall installs the chart like `helm install --wait` and returns the release.
func helmInstall(t *testing.T, ctx context.Context, cfg *action.Configuration, values map[string]any) *release.Release {
	t.Helper()
	ch, err := loader.Load(filepath.Join(repo, "charts", "boardreadyops"))
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = releaseName, namespace
	in.WaitStrategy, in.Timeout = kube.StatusWatcherStrategy, 10*time.Minute
	r, err := in.RunWithContext(ctx, ch, plain(t, values))
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	return asRelease(t, r)
}

func helmUpgrade(t *testing.T, ctx context.Context, cfg *action.Configuration, values map[string]any) *release.Release {
	t.Helper()
	ch, err := loader.Load(filepath.Join(repo, "charts", "boardreadyops"))
	if err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	up.WaitStrategy, up.Timeout = kube.StatusWatcherStrategy, 10*time.Minute
	r, err := up.RunWithContext(ctx, releaseName, ch, plain(t, values))
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	return asRelease(t, r)
}

func helmUninstall(t *testing.T, cfg *action.Configuration) {
	t.Helper()
	un := action.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout = kube.StatusWatcherStrategy, 5*time.Minute
	if _, err := un.Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
}

// plain turns values into the JSON types (map[string]any, []any, float64) that values read
// from YAML have, which is what the chart's schema validation expects.
func plain(t *testing.T, values map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func asRelease(t *testing.T, r any) *release.Release {
	t.Helper()
	rel, ok := r.(*release.Release)
	if !ok {
		t.Fatalf("helm returned a %T, want a v1 release", r)
	}
	return rel
}

// hookSucceeded checks that the release's migration hook ran and succeeded.
func hookSucceeded(rel *release.Release) error {
	for _, h := range rel.Hooks {
		if h.Kind == "Job" && h.Name == prefix+"migrations" {
			if h.LastRun.Phase != release.HookPhaseSucceeded {
				return fmt.Errorf("migration hook %s: phase %q", h.Name, h.LastRun.Phase)
			}
			return nil
		}
	}
	return fmt.Errorf("release %s revision %d has no migration hook Job", rel.Name, rel.Version)
}
