package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// hostState is what Up changes on the host, recorded before the change so that Down restores it.
type hostState struct {
	Sysctls     map[string]string              `json:"sysctls"`      // path under /proc/sys → value before Up
	Chains      map[string]map[string][]string `json:"chains"`       // iptables command → table → chains before Up
	CreatedDirs []string                       `json:"created_dirs"` // host directories outside Dir that did not exist (removed when empty)
	Interfaces  []string                       `json:"interfaces"`   // network interfaces before Up
	Netns       []string                       `json:"netns"`        // /var/run/netns entries before Up
}

// Sysctls the kubelet (kernel tunables), kube-proxy and the pod network change.
var touchedSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// Host directories that containerd and the CNI plugins use whatever their configuration says.
var hostDirs = []string{"/run/containerd", "/var/run/netns", "/var/lib/cni", "/etc/cni", "/opt/cni"}

var iptablesCommands = []string{"iptables", "ip6tables"}

func (c *Config) statePath() string { return c.path("run", "host.json") }

func (c *Config) recordHost() (*hostState, error) {
	if b, err := os.ReadFile(c.statePath()); err == nil { // an earlier Up that was not taken down
		var s hostState
		return &s, json.Unmarshal(b, &s)
	}
	s := &hostState{Sysctls: map[string]string{}, Chains: map[string]map[string][]string{}}
	for _, k := range touchedSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, cmd := range iptablesCommands {
		if ch, err := iptablesChains(cmd); err == nil {
			s.Chains[cmd] = ch
		}
	}
	for _, d := range hostDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			s.CreatedDirs = append(s.CreatedDirs, d)
		}
	}
	s.Interfaces = interfaces()
	if entries, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range entries {
			s.Netns = append(s.Netns, filepath.Join("/var/run/netns", e.Name()))
		}
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	return s, os.WriteFile(c.statePath(), b, 0o644)
}

func interfaces() []string {
	entries, _ := os.ReadDir("/sys/class/net")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// iptablesChains lists the user-defined chains of every table, from iptables-save. (Tables that
// iptables-nft creates stay behind, empty, when their last chain goes: iptables cannot delete a
// table.)
func iptablesChains(cmd string) (map[string][]string, error) {
	out, err := exec.Command(cmd + "-save").Output()
	if err != nil {
		return nil, err
	}
	tables := map[string][]string{}
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			tables[table] = nil
		case strings.HasPrefix(line, ":"):
			if f := strings.Fields(line[1:]); len(f) > 1 && f[1] == "-" { // user-defined (built-in chains have a policy)
				tables[table] = append(tables[table], f[0])
			}
		}
	}
	return tables, nil
}

// restoreIptables deletes the chains that appeared since s was recorded, and every rule that
// jumps to one of them, leaving each table with the chains it had.
func restoreIptables(s *hostState) error {
	var errs []error
	for _, cmd := range iptablesCommands {
		before, ok := s.Chains[cmd]
		if !ok {
			continue
		}
		out, err := exec.Command(cmd + "-save").Output()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		table := ""
		added := map[string][]string{}
		var rules [][]string // table, rule
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":"):
				f := strings.Fields(line[1:])
				if len(f) > 1 && f[1] == "-" && !slices.Contains(before[table], f[0]) {
					added[table] = append(added[table], f[0])
				}
			case strings.HasPrefix(line, "-A "):
				rules = append(rules, []string{table, line})
			}
		}
		for _, r := range rules {
			f := strings.Fields(r[1])
			chain := f[1]
			if slices.Contains(added[r[0]], chain) {
				continue // flushed with its chain
			}
			target := ""
			for i := range f {
				if (f[i] == "-j" || f[i] == "-g") && i+1 < len(f) {
					target = f[i+1]
				}
			}
			if !slices.Contains(added[r[0]], target) {
				continue
			}
			// iptables-save quotes arguments with spaces; run through a shell to keep them.
			del := cmd + " -w -t " + r[0] + " -D " + strings.TrimPrefix(r[1], "-A ")
			if out, err := exec.Command("sh", "-c", del).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w: %s", del, err, out))
			}
		}
		for t, chains := range added {
			for _, ch := range chains {
				exec.Command(cmd, "-w", "-t", t, "-F", ch).Run() //nolint:errcheck
			}
			for _, ch := range chains {
				if out, err := exec.Command(cmd, "-w", "-t", t, "-X", ch).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s -t %s -X %s: %w: %s", cmd, t, ch, err, out))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// iptablesAdded lists user-defined chains that exist now but did not before Up.
func (c *Config) iptablesAdded(s *hostState) []string {
	var out []string
	for _, cmd := range iptablesCommands {
		before, ok := s.Chains[cmd]
		if !ok {
			continue
		}
		now, err := iptablesChains(cmd)
		if err != nil {
			continue
		}
		for t, chains := range now {
			for _, ch := range chains {
				if !slices.Contains(before[t], ch) {
					out = append(out, fmt.Sprintf("%s -t %s chain %s", cmd, t, ch))
				}
			}
		}
	}
	return out
}

func restoreHost(s *hostState) error {
	var errs []error
	for k, v := range s.Sysctls {
		p := filepath.Join("/proc/sys", k)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", k, v, err))
			}
		}
	}
	for i := len(s.CreatedDirs) - 1; i >= 0; i-- {
		removeEmptyTree(s.CreatedDirs[i])
	}
	return errors.Join(errs...)
}

// removeEmptyTree removes dir and its subdirectories if they hold no files.
func removeEmptyTree(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeEmptyTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir) //nolint:errcheck
}
