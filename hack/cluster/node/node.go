package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Up starts the cluster described by c and waits until its node is Ready. Images the cluster
// needs (at least c.PauseImage) must be pushed to the registry by push, which Up calls once the
// registry serves and before containerd starts. On error, what was started keeps running: call
// Down.
func Up(ctx context.Context, c Config, push func(ctx context.Context, registry string) error) error {
	c.Defaults()
	for _, d := range []string{"run", "logs", "pki", "etcd", "registry", "containerd", "cni/net.d", "cni/ipam", "kubelet", "logs/pods", "config"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kubelet", "kubectl"} {
		if _, err := os.Stat(filepath.Join(c.BinDir, bin)); err != nil {
			return fmt.Errorf("the Kubernetes binaries: %w (hack/cluster/build-binaries.sh builds them)", err)
		}
	}
	if err := ensurePackages(c.Logf); err != nil {
		return err
	}
	if _, err := c.recordHost(); err != nil {
		return err
	}
	// Host preparation. The kubelet's volume mounts need shared mount propagation: Dir becomes a
	// shared bind mount of itself (rather than `mount --make-rshared /`, which would change every
	// mount of the host). Forwarding carries Service traffic between pods; bridge netfilter puts
	// bridged packets through kube-proxy's rules.
	if err := c.sharedDir(); err != nil {
		return err
	}
	for k, v := range map[string]string{"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"} {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	if err := c.bridgeUp(); err != nil {
		return err
	}
	if err := c.cgroupRootUp(); err != nil {
		return err
	}
	if err := writePKI(c.path("pki"), &c); err != nil {
		return err
	}
	if err := c.writeConfigs(); err != nil {
		return err
	}

	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if len(c.RegistryCommand) > 0 {
		argv := append(slices.Clone(c.RegistryCommand), "-addr", c.RegistryAddr, "-dir", c.path("registry"))
		if err := c.start("registry", argv); err != nil {
			return err
		}
		if err := waitHTTP(ctx, "registry", "http://"+c.RegistryAddr+"/v2/", nil, 30*time.Second); err != nil {
			return err
		}
	}
	if push != nil {
		if err := push(ctx, c.RegistryAddr); err != nil {
			return fmt.Errorf("push images: %w", err)
		}
	}
	if err := c.start("containerd", []string{"containerd", "--config", c.path("config", "containerd.toml")}); err != nil {
		return err
	}
	if err := waitFile(ctx, "containerd", c.socket(), 30*time.Second); err != nil {
		return err
	}
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	return c.waitNodeReady(ctx, 3*time.Minute)
}

// Debian packages the node needs, by a program each provides.
var packages = map[string]string{
	"containerd": "containerd", "containerd-shim-runc-v2": "containerd", "runc": "runc",
	"/usr/lib/cni/bridge": "containernetworking-plugins", "iptables": "iptables", "conntrack": "conntrack",
}

// ensurePackages installs the missing ones with apt-get.
func ensurePackages(logf func(string, ...any)) error {
	var missing []string
	for prog, pkg := range packages {
		found := false
		if strings.HasPrefix(prog, "/") {
			_, err := os.Stat(prog)
			found = err == nil
		} else {
			_, err := exec.LookPath(prog)
			found = err == nil
		}
		if !found && !slices.Contains(missing, pkg) {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	logf("installing %s with apt-get", strings.Join(missing, " "))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func (c *Config) sharedDir() error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	if !slices.Contains(mounts, c.Dir) {
		if out, err := exec.Command("mount", "--bind", c.Dir, c.Dir).CombinedOutput(); err != nil {
			return fmt.Errorf("mount --bind %s: %w: %s", c.Dir, err, out)
		}
	}
	if out, err := exec.Command("mount", "--make-rshared", c.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount --make-rshared %s: %w: %s", c.Dir, err, out)
	}
	return nil
}

func (c *Config) bridgeUp() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.Bridge)); err == nil {
		return nil
	}
	addr := fmt.Sprintf("%s/%d", c.BridgeIP(), c.prefixLen())
	for _, args := range [][]string{
		{"link", "add", c.Bridge, "type", "bridge"},
		{"addr", "add", addr, "dev", c.Bridge},
		{"link", "set", c.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// cgroupRootUp creates the kubelet's cgroup root in every mounted cgroup v1 hierarchy (the
// kubelet requires it to exist); cpuset needs its cpus and mems copied from the parent.
func (c *Config) cgroupRootUp() error {
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hier {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a hierarchy (a symlink such as cpu,cpuacct is one of the globbed names too)
		}
		d := filepath.Join(h, cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("%s/%s: %w", d, f, err)
				}
			}
		}
	}
	return nil
}

func (c *Config) writeConfigs() error {
	files := map[string]string{
		"config/containerd.toml":              c.containerdConfig(),
		"cni/net.d/10-boardreadyops.conflist": c.cniConfig(),
		"config/kubelet.yaml":                 c.kubeletConfig(),
		"config/scheduler.yaml":               c.schedulerConfig(),
		"config/kube-proxy.yaml":              c.proxyConfig(),
		"kubeconfig":                          c.kubeconfig("admin"),
	}
	for _, n := range []string{"controller-manager", "scheduler", "kube-proxy", "kubelet-client"} {
		files["config/"+n+".kubeconfig"] = c.kubeconfig(n)
	}
	for name, content := range files {
		if err := os.WriteFile(c.path(name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) schedulerConfig() string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, c.path("config", "scheduler.kubeconfig"))
}

func (c *Config) proxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [%s]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`, c.path("config", "kube-proxy.kubeconfig"), c.PodCIDR, c.NodeName, c.PodCIDR)
}

func (c *Config) bin(name string) string { return filepath.Join(c.BinDir, name) }

func (c *Config) startEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort+1)
	if err := c.start("etcd", []string{c.bin("etcd"), "--name", "boardreadyops", "--data-dir", c.path("etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "boardreadyops=" + peer, "--unsafe-no-fsync", "--log-level", "warn"}); err != nil {
		return err
	}
	return waitHTTP(ctx, "etcd", client+"/health", nil, 60*time.Second)
}

func (c *Config) startControlPlane(ctx context.Context) error {
	pki := func(f string) string { return c.path("pki", f) }
	bridge := c.BridgeIP().String()
	if err := c.start("kube-apiserver", []string{c.bin("kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.EtcdPort),
		"--bind-address=" + bridge, "--advertise-address=" + bridge, fmt.Sprintf("--secure-port=%d", c.APIPort),
		"--service-cluster-ip-range=" + c.ServiceCIDR,
		"--client-ca-file=" + pki("ca.crt"),
		"--tls-cert-file=" + pki("apiserver.crt"), "--tls-private-key-file=" + pki("apiserver.key"),
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + pki("ca.crt"), "--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki("sa.pub"), "--service-account-signing-key-file=" + pki("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=false", "--profiling=false",
	}); err != nil {
		return err
	}
	tlsCfg, err := c.adminTLS()
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "kube-apiserver", c.APIServerURL()+"/readyz", tlsCfg, 3*time.Minute); err != nil {
		return err
	}
	kc := func(n string) string { return c.path("config", n+".kubeconfig") }
	if err := c.start("kube-controller-manager", []string{c.bin("kube-controller-manager"),
		"--kubeconfig=" + kc("controller-manager"), "--authentication-kubeconfig=" + kc("controller-manager"),
		"--authorization-kubeconfig=" + kc("controller-manager"),
		"--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials",
		"--service-account-private-key-file=" + pki("sa.key"), "--root-ca-file=" + pki("ca.crt"),
		"--cluster-signing-cert-file=" + pki("ca.crt"), "--cluster-signing-key-file=" + pki("ca.key"),
		"--service-cluster-ip-range=" + c.ServiceCIDR, "--profiling=false",
	}); err != nil {
		return err
	}
	if err := c.start("kube-scheduler", []string{c.bin("kube-scheduler"),
		"--config=" + c.path("config", "scheduler.yaml"), "--bind-address=127.0.0.1",
		"--authentication-kubeconfig=" + kc("scheduler"), "--authorization-kubeconfig=" + kc("scheduler"), "--profiling=false",
	}); err != nil {
		return err
	}
	if err := c.start("kubelet", []string{c.bin("kubelet"),
		"--config=" + c.path("config", "kubelet.yaml"), "--kubeconfig=" + kc("kubelet-client"),
		"--root-dir=" + c.path("kubelet"), "--hostname-override=" + c.NodeName, "--node-ip=" + bridge,
	}); err != nil {
		return err
	}
	return c.start("kube-proxy", []string{c.bin("kube-proxy"), "--config=" + c.path("config", "kube-proxy.yaml")})
}

func (c *Config) adminTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.path("pki", "admin.crt"), c.path("pki", "admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.path("pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Kubectl runs the cluster's kubectl with the admin kubeconfig and returns its standard output
// (warnings go to its standard error, returned within the error on failure).
func (c Config) Kubectl(ctx context.Context, args ...string) (string, error) {
	c.Defaults()
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

func (c *Config) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := c.Kubectl(ctx, "get", "node", c.NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err == nil && strings.TrimSpace(out) == "True" {
			c.Logf("node %s is Ready", c.NodeName)
			return nil
		}
		if err := c.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready after %s (last: %q %w); see %s", c.NodeName, timeout, out, err, c.path("logs", "kubelet.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

var components = []string{"registry", "etcd", "containerd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// exited reports a component that was started and has died, with its log's tail.
func (c *Config) exited() error {
	for _, n := range components {
		if _, err := os.Stat(c.path("run", n+".pid")); err != nil {
			continue
		}
		if _, ok := c.pid(n); !ok {
			return fmt.Errorf("%s exited: %s", n, tail(c.path("logs", n+".log"), 15))
		}
	}
	return nil
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func waitHTTP(ctx context.Context, name, url string, tlsCfg *tls.Config, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %s: %w", name, url, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func waitFile(ctx context.Context, name, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s did not appear within %s", name, path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
