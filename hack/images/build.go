package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"go/version"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	defaultBase = "gcr.io/distroless/static-debian12:nonroot"
	nonroot     = 65532
)

// imageSpec is one image: the Go package built into it (a directory relative to the repository,
// built from inside its own module with GOWORK=off, as a user's checkout of one module builds)
// and the ports it serves.
type imageSpec struct {
	name   string
	module string // module directory, relative to the repository
	pkg    string // package, relative to module
	ports  []string
}

var images = []imageSpec{
	{name: "ingest", module: "services/ingest", pkg: ".", ports: []string{"8080/tcp", "9090/tcp"}},
	{name: "lifecycle", module: "services/lifecycle", pkg: ".", ports: []string{"9090/tcp"}},
	{name: "outbox-dispatcher", module: "services/outbox-dispatcher", pkg: ".", ports: []string{"9090/tcp"}},
	{name: "operator", module: "services/operator", pkg: ".", ports: []string{"9090/tcp"}},
	{name: "brops", module: "services/brops", pkg: "."},
	// The pod sandbox image of hack/cluster's node; not part of a release.
	{name: "pause", module: "hack", pkg: "./pause"},
}

func imageNames() []string {
	n := make([]string, len(images))
	for i, s := range images {
		n[i] = s.name
	}
	return n
}

// productImages are the images a release consists of: every image but pause.
func productImages() []string {
	var n []string
	for _, s := range images {
		if s.name != "pause" {
			n = append(n, s.name)
		}
	}
	return n
}

func findImage(n string) (imageSpec, bool) {
	for _, s := range images {
		if s.name == n {
			return s, true
		}
	}
	return imageSpec{}, false
}

type options struct {
	base, tag, source, revision, arch string
	caBundle, zoneinfo, repo          string
	created                           time.Time
}

type builder struct {
	o    options
	base v1.Image
}

func newBuilder(ctx context.Context, o options) (*builder, error) {
	b := &builder{o: o}
	var err error
	if o.base == "local" {
		b.base, err = localBase(o)
	} else {
		var ref name.Reference
		if ref, err = name.ParseReference(o.base); err != nil {
			return nil, err
		}
		b.base, err = remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
			remote.WithPlatform(v1.Platform{OS: "linux", Architecture: o.arch}))
	}
	if err != nil {
		return nil, fmt.Errorf("base image %s: %w", o.base, err)
	}
	return b, nil
}

// build compiles spec's binary and lays it onto the base.
func (b *builder) build(ctx context.Context, spec imageSpec) (v1.Image, error) {
	tmp, err := os.MkdirTemp("", "images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, spec.name)
	dir := filepath.Join(b.o.repo, spec.module)
	want, err := moduleToolchain(ctx, dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, spec.pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.o.arch, "GOFLAGS=-mod=readonly")
	if os.Getenv("GOTOOLCHAIN") == "" {
		// A Go installed with GOTOOLCHAIN=local in its go.env ignores the toolchain line.
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+want)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build: %w", err)
	}
	if err := checkToolchain(bin, want); err != nil {
		return nil, fmt.Errorf("%s: %w", spec.name, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	l := tarLayer{at: b.o.created}
	l.dir("usr/", 0o755, 0)
	l.dir("usr/local/", 0o755, 0)
	l.dir("usr/local/bin/", 0o755, 0)
	l.file("usr/local/bin/"+spec.name, 0o555, 0, data)
	layer, err := l.layer()
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(b.base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "hack/images: " + spec.module + "/" + spec.pkg, Created: v1.Time{Time: b.o.created}},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.Config.DeepCopy()
	cfg.Entrypoint = []string{"/usr/local/bin/" + spec.name}
	cfg.Cmd = nil
	cfg.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
	cfg.WorkingDir = "/"
	cfg.ExposedPorts = map[string]struct{}{}
	for _, p := range spec.ports {
		cfg.ExposedPorts[p] = struct{}{}
	}
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	for k, v := range b.labels(spec) {
		cfg.Labels[k] = v
	}
	if img, err = mutate.Config(img, *cfg); err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.CreatedAt(img, v1.Time{Time: b.o.created})
}

func (b *builder) labels(spec imageSpec) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   b.o.source,
		"org.opencontainers.image.revision": b.o.revision,
		"org.opencontainers.image.version":  b.o.tag,
		"org.opencontainers.image.title":    spec.name,
		"org.opencontainers.image.created":  b.o.created.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// localBase is a distroless-like base made of this machine's CA bundle and time zone database,
// passwd and group files naming root, nobody and nonroot (65532), nsswitch.conf, /tmp and the
// nonroot home: the files a static Go service reads from its root filesystem, and nothing that
// executes (no shell, no package manager).
func localBase(o options) (v1.Image, error) {
	l := tarLayer{at: o.created}
	for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "usr/", "usr/share/", "root/", "home/"} {
		mode := int64(0o755)
		if d == "root/" {
			mode = 0o700
		}
		l.dir(d, mode, 0)
	}
	l.dir("tmp/", 0o1777, 0)
	l.dir("home/nonroot/", 0o700, nonroot)
	l.file("etc/passwd", 0o644, 0, []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	l.file("etc/group", 0o644, 0, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"))
	l.file("etc/nsswitch.conf", 0o644, 0, []byte("hosts: files dns\n"))
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return nil, err
	}
	l.file("etc/ssl/certs/ca-certificates.crt", 0o644, 0, ca)
	if err := l.tree(o.zoneinfo, "usr/share/zoneinfo"); err != nil {
		return nil, err
	}
	layer, err := l.layer()
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(emptyOCI(), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "hack/images: local base", Created: v1.Time{Time: o.created}},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = o.arch, "linux", v1.Time{Time: o.created}
	cf.Config = v1.Config{
		User: fmt.Sprintf("%d", nonroot),
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		WorkingDir: "/",
	}
	return mutate.ConfigFile(img, cf)
}

// tarLayer accumulates a layer's entries, each stamped with the time at, so that the same inputs
// give the same digest.
type tarLayer struct {
	at  time.Time
	buf bytes.Buffer
	tw  *tar.Writer
	err error
}

func (l *tarLayer) header(h *tar.Header, data []byte) {
	if l.err != nil {
		return
	}
	if l.tw == nil {
		l.tw = tar.NewWriter(&l.buf)
	}
	h.Format = tar.FormatPAX
	h.ModTime = l.at
	if l.err = l.tw.WriteHeader(h); l.err == nil && len(data) > 0 {
		_, l.err = l.tw.Write(data)
	}
}

func (l *tarLayer) dir(name string, mode int64, owner int) {
	l.header(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner}, nil)
}

func (l *tarLayer) file(name string, mode int64, owner int, data []byte) {
	l.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: owner, Gid: owner, Size: int64(len(data))}, data)
}

// tree copies a host directory (regular files, directories and symlinks) to dst, in lexical order.
func (l *tarLayer) tree(src, dst string) error {
	var paths []string
	if err := filepath.WalkDir(src, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		rel, _ := filepath.Rel(src, p)
		target := filepath.ToSlash(filepath.Join(dst, rel))
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			l.dir(target+"/", 0o755, 0)
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: target, Linkname: link, Mode: 0o777}, nil)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			l.file(target, 0o644, 0, data)
		}
	}
	return l.err
}

func (l *tarLayer) layer() (v1.Layer, error) {
	if l.err != nil {
		return nil, l.err
	}
	if err := l.tw.Close(); err != nil {
		return nil, err
	}
	data := l.buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

func emptyOCI() v1.Image {
	return mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
}

// moduleToolchain is the Go toolchain the module in dir names: its go.mod's toolchain line, or
// its go line when it has none, as the go command reads them.
func moduleToolchain(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "edit", "-json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod edit -json in %s: %w", dir, err)
	}
	var mod struct {
		Go        string
		Toolchain string
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("go mod edit -json in %s: %w", dir, err)
	}
	if mod.Toolchain != "" {
		return mod.Toolchain, nil
	}
	return "go" + mod.Go, nil
}

// checkToolchain refuses a binary built by an older Go than want. An image is what runs in
// production: one built by a Go whose standard library has known vulnerabilities, because the
// machine's own Go ignored the toolchain line, must not be published (docs/security.md).
func checkToolchain(bin, want string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return err
	}
	if version.Compare(info.GoVersion, want) < 0 {
		return fmt.Errorf("built by %s, older than %s, the toolchain its go.mod names: export GOTOOLCHAIN=%s (the Makefile does)",
			info.GoVersion, want, want)
	}
	return nil
}
