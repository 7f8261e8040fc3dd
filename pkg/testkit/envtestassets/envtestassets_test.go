package envtestassets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDir(t *testing.T) {
	// Not parallel: it sets environment variables.
	empty := t.TempDir()
	full := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(full, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CACHE_HOME", empty)
	t.Setenv("BOARDREADYOPS_ENVTEST_DIR", "")
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	if _, err := Dir(); !errors.Is(err, ErrMissing) {
		t.Fatalf("Dir() with no binaries: err = %v, want ErrMissing", err)
	}
	t.Setenv("BOARDREADYOPS_ENVTEST_DIR", full)
	if d, err := Dir(); err != nil || d != full {
		t.Fatalf("Dir() = %q, %v; want %q", d, err, full)
	}
	t.Setenv("BOARDREADYOPS_ENVTEST_DIR", "")
	t.Setenv("KUBEBUILDER_ASSETS", full)
	if d, err := Dir(); err != nil || d != full {
		t.Fatalf("Dir() = %q, %v; want %q", d, err, full)
	}
}
