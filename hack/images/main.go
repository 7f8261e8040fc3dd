// Command images builds one container image per service without a container engine: each is the
// service's static Go binary in /usr/local/bin on a base image, running as UID 65532, with no
// shell and with the OCI labels source, revision and version. The image definition is this file;
// `make images` runs it.
//
//	go run ./hack/images                                   # build onto the public distroless base, into an OCI layout
//	go run ./hack/images -push 127.0.0.1:5000/boardreadyops -base local
//
// -base is an image reference (default gcr.io/distroless/static-debian12:nonroot) or "local": a
// distroless-like base assembled from this machine's CA bundle and time zone database plus
// passwd/group entries for nonroot (65532), for machines that cannot reach public registries.
// Without -push the images are written to the OCI image layout -out, tagged by annotation.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	var (
		o        options
		push     = flag.String("push", "", "push the images to this registry and repository prefix (<prefix>/<image>:<tag>) instead of writing -out")
		out      = flag.String("out", ".data/images", "OCI image layout directory written when -push is not set")
		only     = flag.String("images", strings.Join(productImages(), ","), "comma-separated images to build (pause, the cluster's sandbox image, only when named)")
		repo     = flag.String("repository", ".", "repository root")
		sizeFile = flag.String("sizes", "", "also write the image size table (Markdown) to this file")
	)
	flag.StringVar(&o.base, "base", defaultBase, `base image reference, or "local" for a base assembled from this machine's files`)
	flag.StringVar(&o.tag, "tag", "dev", "image tag, also the version label")
	flag.StringVar(&o.source, "source", "https://github.com/boardreadyops/cloud", "source label (org.opencontainers.image.source)")
	flag.StringVar(&o.revision, "revision", "", "revision label (default: git HEAD, with -dirty for uncommitted changes)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the images (linux only)")
	flag.StringVar(&o.caBundle, "local-ca-bundle", "/etc/ssl/certs/ca-certificates.crt", `CA bundle copied into the "local" base`)
	flag.StringVar(&o.zoneinfo, "local-zoneinfo", "/usr/share/zoneinfo", `time zone database copied into the "local" base`)
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("images: ")

	var err error
	if o.repo, err = filepath.Abs(*repo); err != nil {
		log.Fatal(err)
	}
	if o.revision == "" {
		o.revision = gitRevision(o.repo)
	}
	o.created = commitTime(o.repo)
	ctx := context.Background()
	b, err := newBuilder(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	var sizes []imageSize
	var lp layout.Path
	if *push == "" {
		if lp, err = layout.Write(*out, empty.Index); err != nil {
			log.Fatal(err)
		}
	}
	for _, n := range strings.Split(*only, ",") {
		spec, ok := findImage(n)
		if !ok {
			log.Fatalf("unknown image %q (known: %s)", n, strings.Join(imageNames(), ", "))
		}
		start := time.Now()
		img, err := b.build(ctx, spec)
		if err != nil {
			log.Fatalf("%s: %v", n, err)
		}
		size, err := compressedSize(img)
		if err != nil {
			log.Fatal(err)
		}
		sizes = append(sizes, imageSize{name: n, bytes: size})
		ref := n + ":" + o.tag
		if *push != "" {
			tag, err := name.NewTag(strings.TrimSuffix(*push, "/") + "/" + ref)
			if err != nil {
				log.Fatal(err)
			}
			if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
				log.Fatalf("push %s: %v", tag, err)
			}
			ref = tag.String()
		} else if err := lp.ReplaceImage(img, matchRef(ref), layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			log.Fatal(err)
		}
		d, _ := img.Digest()
		log.Printf("%s@%s %s (%s)", ref, d, mib(size), time.Since(start).Round(time.Millisecond))
	}
	table := sizeTable(sizes, o)
	fmt.Print(table)
	if *sizeFile != "" {
		if err := os.WriteFile(*sizeFile, []byte(table), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func matchRef(ref string) func(v1.Descriptor) bool {
	return func(d v1.Descriptor) bool { return d.Annotations["org.opencontainers.image.ref.name"] == ref }
}

type imageSize struct {
	name  string
	bytes int64
}

func sizeTable(sizes []imageSize, o options) string {
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 0, 1, ' ', 0)
	fmt.Fprintf(w, "| image\t| compressed size (base %s, linux/%s) |\n|---\t|---|\n", o.base, o.arch)
	for _, s := range sizes {
		fmt.Fprintf(w, "| %s\t| %s |\n", s.name, mib(s.bytes))
	}
	w.Flush()
	return sb.String()
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

func compressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	total := m.Config.Size
	for _, l := range m.Layers {
		total += l.Size
	}
	return total, nil
}

func gitRevision(dir string) string {
	rev, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	r := strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		r += "-dirty"
	}
	return r
}

// commitTime is the image creation time: SOURCE_DATE_EPOCH, else HEAD's commit time, so that
// the same commit gives the same image.
func commitTime(dir string) time.Time {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		out, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Unix(0, 0).UTC()
		}
		s = strings.TrimSpace(string(out))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Unix(0, 0).UTC()
	}
	return time.Unix(n, 0).UTC()
}
