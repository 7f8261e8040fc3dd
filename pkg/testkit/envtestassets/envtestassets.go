// Package envtestassets finds the etcd and kube-apiserver binaries that controller-runtime's
// envtest starts. They are built from source by hack/envtest/build-binaries.sh (they cannot be
// downloaded here) into a cache directory; `make test` exports KUBEBUILDER_ASSETS, and a plain
// `go test` finds the same cache on its own.
package envtestassets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Versions the build script defaults to; keep in step with hack/envtest/build-binaries.sh.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
)

// ErrMissing reports that no directory holds both binaries.
var ErrMissing = errors.New("envtest binaries (etcd, kube-apiserver) not found: run `make envtest` " +
	"(hack/envtest/build-binaries.sh builds them once, ~20 min on 2 cores) or set KUBEBUILDER_ASSETS")

// Dir returns the directory holding etcd and kube-apiserver: KUBEBUILDER_ASSETS when set, else
// the build script's cache directory ($BOARDREADYOPS_ENVTEST_DIR, or under $XDG_CACHE_HOME or
// ~/.cache).
func Dir() (string, error) {
	var candidates []string
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		candidates = append(candidates, d)
	}
	if d := os.Getenv("BOARDREADYOPS_ENVTEST_DIR"); d != "" {
		candidates = append(candidates, d)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		candidates = append(candidates, filepath.Join(cache, "boardreadyops", "envtest",
			fmt.Sprintf("k8s-%s-etcd-%s", KubernetesVersion, EtcdVersion)))
	}
	for _, d := range candidates {
		if executable(filepath.Join(d, "etcd")) && executable(filepath.Join(d, "kube-apiserver")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (looked in %v)", ErrMissing, candidates)
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
