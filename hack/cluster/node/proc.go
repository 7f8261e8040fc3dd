package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A started process is remembered as run/<name>.pid holding "<pid> <start time>", the start time
// being field 22 of /proc/<pid>/stat: a later Down signals the pid only while it is still that
// process.
func (c *Config) start(name string, argv []string, env ...string) error {
	logFile, err := os.OpenFile(c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = c.Dir
	// Own session: the cluster outlives `make cluster-up`, and a terminal's Ctrl-C does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	st, err := startTime(cmd.Process.Pid)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path("run", name+".pid"), []byte(fmt.Sprintf("%d %s\n", cmd.Process.Pid, st)), 0o644); err != nil {
		return err
	}
	// Reap it when it exits, so that a dead child is seen as dead (not a zombie) by alive().
	go cmd.Wait() //nolint:errcheck
	c.Logf("started %s (pid %d), log %s", name, cmd.Process.Pid, logFile.Name())
	return nil
}

func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces; fields after its closing parenthesis are plain.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f[19], nil
}

// pid returns the recorded process of name while it still runs.
func (c *Config) pid(name string) (int, bool) {
	b, err := os.ReadFile(c.path("run", name+".pid"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, false
	}
	return pid, alive(pid, f[1])
}

func alive(pid int, start string) bool {
	st, err := startTime(pid)
	if err != nil || st != start {
		return false
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	state := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
	return state != "Z" && state != "X"
}

// stop sends SIGTERM to name's process, then SIGKILL after grace, and waits for it to go.
func (c *Config) stop(name string, grace time.Duration) {
	pid, ok := c.pid(name)
	defer os.Remove(c.path("run", name+".pid"))
	if !ok {
		return
	}
	c.Logf("stopping %s (pid %d)", name, pid)
	b, _ := os.ReadFile(c.path("run", name+".pid"))
	start := strings.Fields(string(b))[1]
	syscall.Kill(pid, syscall.SIGTERM) //nolint:errcheck
	deadline := time.Now().Add(grace)
	for alive(pid, start) {
		if time.Now().After(deadline) {
			c.Logf("%s did not stop within %s: SIGKILL", name, grace)
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesMatching lists the pids whose command line contains every needle.
func processesMatching(needles ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		ok := true
		for _, n := range needles {
			if !bytes.Contains(cmdline, []byte(n)) {
				ok = false
				break
			}
		}
		if ok {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Leftovers lists what of a cluster in dir still exists on this machine: processes whose command
// line names dir, mounts under it, and its pod-network bridge. Down leaves none; tests check.
func Leftovers(c Config) []string {
	c.Defaults()
	var out []string
	for _, pid := range processesMatching(c.Dir) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	mounts, _ := mountPoints()
	for _, m := range mounts {
		if within(m, c.Dir) {
			out = append(out, "mount "+m)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", c.Bridge)); err == nil {
		out = append(out, "interface "+c.Bridge)
	}
	for _, d := range cgroupDirs() {
		out = append(out, "cgroup "+d)
	}
	sort.Strings(out)
	return out
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// mountPoints lists this mount namespace's mount points, in mount order.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// unmountUnder unmounts every mount point under dir, deepest (latest) first.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 {
		mounts, err := mountPoints()
		if err != nil {
			return err
		}
		errs = errs[:0]
		n := 0
		for i := len(mounts) - 1; i >= 0; i-- {
			if !within(mounts[i], dir) {
				continue
			}
			n++
			if err := syscall.Unmount(mounts[i], 0); err != nil {
				if err2 := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err2 != nil && !errors.Is(err2, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("umount %s: %w", mounts[i], err2))
				}
			}
		}
		if n == 0 {
			return nil
		}
	}
	return errors.Join(errs...)
}

const cgroupRoot = "boardreadyops-cluster"

// cgroupDirs lists the cgroup v1 directories of the kubelet's cgroup root, deepest first.
func cgroupDirs() []string {
	var dirs []string
	ctrls, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupRoot)
	if d := "/sys/fs/cgroup/" + cgroupRoot; isDir(d) { // cgroup v2
		ctrls = append(ctrls, d)
	}
	for _, root := range ctrls {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error { //nolint:errcheck
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// killCgroups SIGKILLs every process left in the kubelet's cgroups and removes them.
func (c *Config) killCgroups() error {
	var errs []error
	for range 50 {
		dirs := cgroupDirs()
		if len(dirs) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, d := range dirs {
			procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, p := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(p); err == nil {
					c.Logf("killing leftover pod process %d (%s)", pid, d)
					syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck
				}
			}
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errs...)
}
