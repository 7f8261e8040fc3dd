package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Down stops everything Up started and removes what the cluster left on the host: pod sandboxes
// (through the CRI, so that the CNI plugin releases their interfaces and addresses), leftover
// container processes and cgroups, mounts under c.Dir, the bridge, iptables chains added since
// Up, and the sysctls and mount propagation Up changed. It keeps c.Dir/logs. It is safe to run
// when nothing, or only part of the cluster, runs; it returns what it could not remove.
func Down(ctx context.Context, c Config) error {
	c.Defaults()
	var errs []error
	var hs hostState
	if b, err := os.ReadFile(c.statePath()); err == nil {
		if err := json.Unmarshal(b, &hs); err != nil {
			errs = append(errs, err)
		}
	}
	c.stop("kubelet", 30*time.Second)
	if _, ok := c.pid("containerd"); ok {
		if err := c.removePods(ctx); err != nil {
			errs = append(errs, fmt.Errorf("removing pod sandboxes: %w", err))
		}
	}
	c.stop("containerd", 15*time.Second)
	// Shims outlive containerd; those of this cluster name its socket.
	for _, pid := range processesMatching("containerd-shim", c.socket()) {
		c.Logf("killing leftover shim %d", pid)
		syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck
	}
	if err := c.killCgroups(); err != nil {
		errs = append(errs, err)
	}
	c.stop("kube-proxy", 10*time.Second)
	if _, err := os.Stat(c.bin("kube-proxy")); err == nil {
		if out, err := exec.CommandContext(ctx, c.bin("kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
			c.Logf("kube-proxy --cleanup: %v: %s", err, out)
		}
	}
	for _, n := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "registry"} {
		c.stop(n, 15*time.Second)
	}
	if err := unmountUnder(c.Dir); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range hs.newNetns() {
		syscall.Unmount(ns, syscall.MNT_DETACH) //nolint:errcheck
		os.Remove(ns)                           //nolint:errcheck
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.Bridge)); err == nil {
		if out, err := exec.Command("ip", "link", "del", c.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", c.Bridge, err, out))
		}
	}
	if hs.Interfaces != nil {
		for _, i := range interfaces() {
			if strings.HasPrefix(i, "veth") && !slices.Contains(hs.Interfaces, i) {
				exec.Command("ip", "link", "del", i).Run() //nolint:errcheck
			}
		}
	}
	if hs.Chains != nil {
		if err := restoreIptables(&hs); err != nil {
			errs = append(errs, err)
		}
		if added := c.iptablesAdded(&hs); len(added) > 0 {
			errs = append(errs, fmt.Errorf("iptables chains left: %s", strings.Join(added, "; ")))
		}
	}
	if hs.Sysctls != nil {
		if err := restoreHost(&hs); err != nil {
			errs = append(errs, err)
		}
	}
	if left := Leftovers(c); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	}
	if len(errs) == 0 {
		entries, _ := os.ReadDir(c.Dir)
		for _, e := range entries {
			if e.Name() != "logs" {
				if err := os.RemoveAll(c.path(e.Name())); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (s *hostState) newNetns() []string {
	var out []string
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		p := filepath.Join("/var/run/netns", e.Name())
		if strings.HasPrefix(e.Name(), "cni-") && !slices.Contains(s.Netns, p) {
			out = append(out, p)
		}
	}
	return out
}

// CRI connects to the cluster's containerd CRI endpoint.
func (c Config) CRI() (cri.RuntimeServiceClient, cri.ImageServiceClient, func() error, error) {
	c.Defaults()
	conn, err := grpc.NewClient("unix://"+c.socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, nil, err
	}
	return cri.NewRuntimeServiceClient(conn), cri.NewImageServiceClient(conn), conn.Close, nil
}

func (c *Config) removePods(ctx context.Context) error {
	rt, _, closeConn, err := c.CRI()
	if err != nil {
		return err
	}
	defer closeConn() //nolint:errcheck
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pods, err := rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.Items {
		if _, err := rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop %s/%s: %w", p.Metadata.Namespace, p.Metadata.Name, err))
		}
		if _, err := rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove %s/%s: %w", p.Metadata.Namespace, p.Metadata.Name, err))
		}
	}
	if len(pods.Items) > 0 {
		c.Logf("removed %d pod sandboxes", len(pods.Items))
	}
	return errors.Join(errs...)
}
