// Package node starts and stops the single-node Kubernetes cluster of `make cluster-up`: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy (one multicall
// binary, hack/cluster/build-binaries.sh), containerd with runc, a CNI bridge, and a loopback
// image registry. Every process runs detached with a pid file under Config.Dir/run, so that Down
// — from the same process or a later `make cluster-down` — stops them and removes what they
// leave: pod sandboxes, mounts, cgroups, the bridge, iptables chains and changed sysctls.
//
// Addresses: the API server and the kubelet listen on the bridge address (the `kubernetes`
// Service's endpoint cannot be loopback); everything else listens on loopback. Pods reach the
// host only at the bridge address; no address masquerading is set up, so no traffic leaves the
// machine.
package node

import (
	"fmt"
	"net"
	"path/filepath"
)

// Config describes one cluster. Zero fields take the defaults of Defaults.
type Config struct {
	Dir             string   // state directory (absolute); the kubeconfig is Dir/kubeconfig
	BinDir          string   // holds etcd and the kube multicall binary with its symlinks
	NodeName        string   // the node's name
	Bridge          string   // Linux bridge of the pod network
	PodCIDR         string   // pod addresses; the bridge takes the first
	ServiceCIDR     string   // ClusterIP range; the first is the `kubernetes` Service
	APIPort         int      // kube-apiserver's port on the bridge address
	EtcdPort        int      // etcd's client port on loopback (the peer port is EtcdPort+1)
	RegistryAddr    string   // loopback address of the image registry
	RegistryCommand []string // runs the registry: the command, then `-addr RegistryAddr -dir ...` is appended
	PauseImage      string   // sandbox image (default: RegistryAddr/boardreadyops/pause:dev)
	Logf            func(format string, args ...any)
}

// Defaults fills the zero fields of c.
func (c *Config) Defaults() {
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&c.NodeName, "brops-node")
	set(&c.Bridge, "brops0")
	set(&c.PodCIDR, "10.223.0.0/24")
	set(&c.ServiceCIDR, "10.224.0.0/24")
	set(&c.RegistryAddr, "127.0.0.1:5001")
	set(&c.PauseImage, c.RegistryAddr+"/boardreadyops/pause:dev")
	if c.APIPort == 0 {
		c.APIPort = 6443
	}
	if c.EtcdPort == 0 {
		c.EtcdPort = 23790
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// nth is the n-th address of cidr.
func nth(cidr string, n byte) net.IP {
	_, ipn, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(fmt.Sprintf("bad CIDR %q: %v", cidr, err))
	}
	ip := ipn.IP.To4()
	out := net.IPv4(ip[0], ip[1], ip[2], ip[3]+n).To4()
	return out
}

// BridgeIP is the host's address on the pod network: the API server's advertised address, and
// where pods reach services that run on the host (PostgreSQL, the GitHub simulator).
func (c *Config) BridgeIP() net.IP { return nth(c.PodCIDR, 1) }

// KubernetesServiceIP is the ClusterIP of the `kubernetes` Service.
func (c *Config) KubernetesServiceIP() net.IP { return nth(c.ServiceCIDR, 1) }

// APIServerURL is the API server's URL.
func (c *Config) APIServerURL() string {
	return "https://" + net.JoinHostPort(c.BridgeIP().String(), fmt.Sprint(c.APIPort))
}

// Kubeconfig is the cluster-admin kubeconfig's path.
func (c *Config) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

func (c *Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func (c *Config) socket() string { return c.path("run", "containerd.sock") }

func (c *Config) prefixLen() int {
	_, ipn, _ := net.ParseCIDR(c.PodCIDR)
	ones, _ := ipn.Mask.Size()
	return ones
}

func (c *Config) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%[8]q]
    endpoint = ["http://%[8]s"]
`, c.path("containerd", "root"), c.path("containerd", "state"), c.socket(), c.path("run", "containerd-ttrpc.sock"),
		c.path("containerd", "opt"), c.PauseImage, c.path("cni", "net.d"), c.RegistryAddr)
}

func (c *Config) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "boardreadyops",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    }
  ]
}
`, c.Bridge, c.PodCIDR, c.BridgeIP(), c.path("cni", "ipam"))
}

func (c *Config) kubeletConfig() string {
	pki := c.path("pki")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /boardreadyops-cluster
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
tlsCertFile: %s
tlsPrivateKeyFile: %s
failSwapOn: false
podLogsDir: %s
podCIDR: %s
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
`, c.socket(), c.BridgeIP(), filepath.Join(pki, "ca.crt"), filepath.Join(pki, "kubelet-server.crt"),
		filepath.Join(pki, "kubelet-server.key"), c.path("logs", "pods"), c.PodCIDR)
}

// kubeconfig is a kubeconfig for the client certificate pki/<name>.
func (c *Config) kubeconfig(name string) string {
	pki := c.path("pki")
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: boardreadyops
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: boardreadyops
  context: {cluster: boardreadyops, user: %s}
current-context: boardreadyops
`, c.APIServerURL(), filepath.Join(pki, "ca.crt"), name, filepath.Join(pki, name+".crt"), filepath.Join(pki, name+".key"), name)
}
