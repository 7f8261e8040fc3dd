package main

import (
	"archive/tar"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestImageDefinition builds the brops image onto the local base, pushes it to an in-process
// registry over HTTP, pulls it back and checks what the chart and the restricted Pod Security
// Standard rely on: UID 65532, the entrypoint, no shell, the OCI labels, one diffID per layer
// (containerd refuses an image without), and the same digest from a second build.
func TestImageDefinition(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(registry.New())
	defer reg.Close()
	o := options{base: "local", tag: "t1", source: "https://example.test/src", revision: "abc123", arch: runtime.GOARCH,
		caBundle: "/etc/ssl/certs/ca-certificates.crt", zoneinfo: "/usr/share/zoneinfo", repo: repo, created: time.Unix(1700000000, 0).UTC()}
	if _, err := os.Stat(o.caBundle); err != nil {
		t.Fatalf("this machine's CA bundle: %v (Debian: apt-get install ca-certificates)", err)
	}
	ctx := context.Background()
	b, err := newBuilder(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := findImage("brops")
	img, err := b.build(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(strings.TrimPrefix(reg.URL, "http://") + "/boardreadyops/brops:t1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/brops" {
		t.Errorf("user %q, entrypoint %q", cf.Config.User, cf.Config.Entrypoint)
	}
	for k, want := range map[string]string{"org.opencontainers.image.source": o.source, "org.opencontainers.image.revision": "abc123", "org.opencontainers.image.version": "t1"} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	layers, err := pulled.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.RootFS.DiffIDs) != len(layers) || len(layers) != 2 {
		t.Errorf("%d layers, %d diffIDs; want 2 and 2 (base, binary)", len(layers), len(cf.RootFS.DiffIDs))
	}
	files := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimSuffix(h.Name, "/")] = h
		}
		rc.Close()
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
		if _, ok := files[shell]; ok {
			t.Errorf("image holds %s", shell)
		}
	}
	for _, f := range []string{"usr/local/bin/brops", "etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/UTC", "tmp"} {
		if _, ok := files[f]; !ok {
			t.Errorf("image lacks %s", f)
		}
	}
	if h := files["home/nonroot"]; h == nil || h.Uid != 65532 {
		t.Errorf("home/nonroot: %+v, want owned by 65532", h)
	}
	again, err := b.build(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one tree: %s and %s, want one digest", d1, d2)
	}
}

// TestCheckToolchain: an image's binary built by an older Go than its module's toolchain line is
// refused. The test binary itself is the binary: built by runtime.Version().
func TestCheckToolchain(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		want string
		ok   bool
	}{
		{runtime.Version(), true},
		{"go1.21.0", true},
		{"go9.99.0", false},
	}
	for _, tt := range tests {
		err := checkToolchain(self, tt.want)
		if (err == nil) != tt.ok {
			t.Errorf("checkToolchain(%s): %v, want ok %v", tt.want, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "export GOTOOLCHAIN="+tt.want) {
			t.Errorf("checkToolchain(%s): %v, want the fix in the message", tt.want, err)
		}
	}
}

// TestModuleToolchain: the toolchain of every service module is the one go.work requires, so
// that images and the workspace build with the same Go.
func TestModuleToolchain(t *testing.T) {
	t.Parallel()
	work, err := os.ReadFile("../../go.work")
	if err != nil {
		t.Fatal(err)
	}
	var goLine string
	for _, l := range strings.Split(string(work), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goLine = "go" + strings.TrimSpace(v)
		}
	}
	for _, m := range []string{"brops", "ingest", "lifecycle", "outbox-dispatcher", "operator"} {
		got, err := moduleToolchain(context.Background(), filepath.Join("../../services", m))
		if err != nil {
			t.Fatal(err)
		}
		if got != goLine {
			t.Errorf("services/%s names toolchain %s, go.work requires %s", m, got, goLine)
		}
	}
}
