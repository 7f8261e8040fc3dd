// Command cluster starts and stops a real single-node Kubernetes cluster on this machine, for
// trying the chart and debugging pods (docs/kubernetes.md). Root only; Linux with cgroups.
//
//	cluster up   [-dir .data/cluster] [-bin DIR] [-images=true]   # make cluster-up
//	cluster down [-dir .data/cluster]                             # make cluster-down
//	cluster registry -addr 127.0.0.1:5001 -dir DIR                # the loopback image registry (run by up)
//
// up builds the Kubernetes binaries once (hack/cluster/build-binaries.sh, cached), starts etcd,
// the loopback registry, pushes the product's images to it (hack/images onto the local base),
// then containerd, the control plane, the kubelet and kube-proxy, and waits for the node to be
// Ready. The admin kubeconfig is written to <dir>/kubeconfig; logs are in <dir>/logs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/boardreadyops/cloud/hack/cluster/node"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("cluster: ")
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".data/cluster", "state directory (kubeconfig, logs, data)")
	switch os.Args[1] {
	case "up":
		bin := fs.String("bin", "", "directory of etcd and the kube binaries (default: build or reuse the cache with hack/cluster/build-binaries.sh)")
		images := fs.Bool("images", true, "build the product's images onto the local base and push them to the registry")
		tag := fs.String("tag", "dev", "tag of the pushed images")
		fs.Parse(os.Args[2:]) //nolint:errcheck
		c := config(*dir)
		if err := up(c, *bin, *images, *tag); err != nil {
			log.Fatalf("%v\n(make cluster-down stops what started)", err)
		}
		fmt.Printf("cluster is up: export KUBECONFIG=%s\nimages: %s/boardreadyops/<image>:%s\n", c.Kubeconfig(), c.RegistryAddr, *tag)
	case "down":
		fs.Parse(os.Args[2:]) //nolint:errcheck
		if err := node.Down(context.Background(), config(*dir)); err != nil {
			log.Fatal(err)
		}
		fmt.Println("cluster is down")
	case "registry":
		addr := fs.String("addr", "127.0.0.1:5001", "listen address (loopback)")
		fs.Parse(os.Args[2:]) //nolint:errcheck
		log.Fatal(serveRegistry(*addr, *dir))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down|registry [flags]")
	os.Exit(2)
}

func config(dir string) node.Config {
	abs, err := filepath.Abs(dir)
	if err != nil {
		log.Fatal(err)
	}
	c := node.Config{Dir: abs, Logf: log.Printf}
	c.Defaults()
	return c
}

// repoRoot is the repository holding this program's sources: the working directory's nearest
// ancestor with go.work.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.work above the working directory: run from the repository")
		}
		d = parent
	}
}

func up(c node.Config, bin string, images bool, tag string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("cluster up needs root (containerd, the kubelet, bridges and iptables)")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if bin == "" {
		cmd := exec.Command(filepath.Join(root, "hack/cluster/build-binaries.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("hack/cluster/build-binaries.sh: %w", err)
		}
		bin = strings.TrimSpace(string(out))
	}
	c.BinDir = bin
	// The registry runs from a copy of this program: `go run` removes its binary when it exits.
	if err := os.MkdirAll(filepath.Join(c.Dir, "run"), 0o755); err != nil {
		return err
	}
	self := filepath.Join(c.Dir, "run", "cluster")
	if err := copyExecutable(self); err != nil {
		return err
	}
	c.RegistryCommand = []string{self, "registry"}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return node.Up(ctx, c, func(ctx context.Context, reg string) error {
		return PushImages(ctx, root, reg+"/boardreadyops", tag, images)
	})
}

// PushImages builds the images onto the local base and pushes them to prefix: all of them, or
// only the pause image the node needs.
func PushImages(ctx context.Context, root, prefix, tag string, all bool) error {
	list := "pause"
	if all {
		list = "ingest,lifecycle,outbox-dispatcher,operator,brops,pause"
	}
	args := []string{"run", "./hack/images", "-base", "local", "-push", prefix, "-tag", tag, "-images", list}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func copyExecutable(dst string) error {
	src, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// serveRegistry serves an OCI distribution registry on a loopback address over plain HTTP:
// blobs on disk under dir, manifests in memory (the cluster pushes its images at every start).
func serveRegistry(addr, dir string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("registry address %s: loopback only", addr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              addr,
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)), registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Printf("registry on http://%s, blobs in %s", addr, dir)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
