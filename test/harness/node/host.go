package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Machine-wide state shared by every node harness on this machine, in
// hostDir: which nodes are up (one file each, naming its run dir and pod
// subnet), and the sysctls as they were before the first of them started.
//
// The kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops
// (setupKernelTunables: there is no way to make it leave them alone and still
// start), and the CNI bridge sets net.ipv4.ip_forward. Nodes may overlap in
// time, so the values are saved when the first node starts and written back
// when the last one stops; a flock serialises the bookkeeping.
const hostDir = "/run/probed-node"

// touchedSysctls are the sysctls a node changes, under /proc/sys.
var touchedSysctls = []string{
	"net/ipv4/ip_forward",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// registration is one node's entry in hostDir/nodes.
type registration struct {
	RunDir     string    `json:"runDir"`
	Subnet     string    `json:"subnet"`
	ProbedPort int       `json:"probedMetricsPort"`
	Created    time.Time `json:"created"`
}

// withHostLock runs f holding an exclusive lock on hostDir/lock.
func withHostLock(f func() error) error {
	if err := os.MkdirAll(filepath.Join(hostDir, "nodes"), 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(hostDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck
	return f()
}

// register records a starting node, saves the sysctls if it is the only
// one, and picks a pod subnet and a port for probed's metrics that no other
// node has (probed runs on the host network). wantPort 0 means
// DefaultProbedMetricsPort if it is free, else any free port; another
// wantPort must be free.
func register(id, runDir string, wantPort int) (subnet string, port int, err error) {
	err = withHostLock(func() error {
		others := liveRegistrations()
		origFile := filepath.Join(hostDir, "sysctl.json")
		if _, err := os.Stat(origFile); os.IsNotExist(err) {
			// No saved values: nothing of ours has changed the machine yet.
			if err := saveSysctls(origFile); err != nil {
				return err
			}
		}
		var taken []string
		ports := map[int]bool{}
		for _, r := range others {
			taken = append(taken, r.Subnet)
			ports[r.ProbedPort] = true
		}
		if subnet, err = pickSubnet(taken); err != nil {
			return err
		}
		if port, err = pickPort(wantPort, ports); err != nil {
			return err
		}
		b, _ := json.Marshal(registration{RunDir: runDir, Subnet: subnet, ProbedPort: port, Created: time.Now()})
		return os.WriteFile(filepath.Join(hostDir, "nodes", id), b, 0o644)
	})
	return subnet, port, err
}

func pickPort(want int, taken map[int]bool) (int, error) {
	if want != 0 {
		if taken[want] || !portFree(want) {
			return 0, fmt.Errorf("port %d for probed's metrics is in use (by another node's probed?)", want)
		}
		return want, nil
	}
	if !taken[DefaultProbedMetricsPort] && portFree(DefaultProbedMetricsPort) {
		return DefaultProbedMetricsPort, nil
	}
	for range 10 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if !taken[p] {
			return p, nil
		}
	}
	return 0, errors.New("no free port for probed's metrics")
}

// registeredRunDirs lists the run dirs of every registered node, live or not.
func registeredRunDirs() []string {
	entries, _ := os.ReadDir(filepath.Join(hostDir, "nodes"))
	var dirs []string
	for _, e := range entries {
		var r registration
		if b, err := os.ReadFile(filepath.Join(hostDir, "nodes", e.Name())); err == nil && json.Unmarshal(b, &r) == nil {
			dirs = append(dirs, r.RunDir)
		}
	}
	return dirs
}

// unregister removes a node's entry and, when no live node is left, writes
// the saved sysctls back.
func unregister(id string) error {
	return withHostLock(func() error {
		if err := os.Remove(filepath.Join(hostDir, "nodes", id)); err != nil && !os.IsNotExist(err) {
			return err
		}
		if len(liveRegistrations()) > 0 {
			return nil
		}
		return restoreSysctls(filepath.Join(hostDir, "sysctl.json"))
	})
}

// liveRegistrations lists the registered nodes, dropping entries whose run
// dir is gone, or which have had time to start but run no process of theirs.
func liveRegistrations() []registration {
	dir := filepath.Join(hostDir, "nodes")
	entries, _ := os.ReadDir(dir)
	var live []registration
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		var r registration
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		stale := err != nil
		if !stale {
			if _, err := os.Stat(r.RunDir); err != nil {
				stale = true
			} else if time.Since(r.Created) > 5*time.Minute && !anyProcessRuns(r.RunDir) {
				stale = true
			}
		}
		if stale {
			_ = os.Remove(path)
			continue
		}
		live = append(live, r)
	}
	return live
}

// anyProcessRuns reports whether a PID file of runDir (its own, or one of
// its control plane's or containerd's) names a live process of that run dir.
func anyProcessRuns(runDir string) bool {
	files, _ := filepath.Glob(filepath.Join(runDir, "*.pid"))
	more, _ := filepath.Glob(filepath.Join(runDir, "*", "*.pid"))
	for _, f := range append(files, more...) {
		var pid int
		if b, err := os.ReadFile(f); err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pidRuns(pid, runDir+"/") {
				return true
			}
		}
	}
	return false
}

func saveSysctls(file string) error {
	vals := map[string]string{}
	for _, k := range touchedSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue // not on this kernel
		}
		vals[k] = strings.TrimSpace(string(b))
	}
	b, _ := json.MarshalIndent(vals, "", "  ")
	return os.WriteFile(file, b, 0o644)
}

// restoreSysctls writes the saved values back where they differ, then
// forgets them.
func restoreSysctls(file string) error {
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	vals := map[string]string{}
	if err := json.Unmarshal(b, &vals); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	for k, v := range vals {
		path := filepath.Join("/proc/sys", k)
		cur, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(file))
	}
	return errors.Join(errs...)
}

// pickSubnet picks a /24 in 10.244.0.0/16 for the pod bridge that no other
// node harness has taken and that overlaps no address or route of this
// machine.
func pickSubnet(taken []string) (string, error) {
	var used []*net.IPNet
	for _, s := range taken {
		if _, n, err := net.ParseCIDR(s); err == nil {
			used = append(used, n)
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				used = append(used, n)
			}
		}
	}
	used = append(used, ipv4Routes()...)
	for _, third := range rand.Perm(254) {
		cidr := fmt.Sprintf("10.244.%d.0/24", third+1)
		_, cand, _ := net.ParseCIDR(cidr)
		clash := false
		for _, u := range used {
			// A default route (0.0.0.0/0) overlaps everything; it does not count.
			if ones, _ := u.Mask.Size(); ones == 0 {
				continue
			}
			if u.Contains(cand.IP) || cand.Contains(u.IP) {
				clash = true
				break
			}
		}
		if !clash {
			return cidr, nil
		}
	}
	return "", errors.New("no free /24 in 10.244.0.0/16 for the pod bridge")
}

// ipv4Routes reads the main IPv4 routing table from /proc/net/route.
func ipv4Routes() []*net.IPNet {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil
	}
	var out []*net.IPNet
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		var dst, mask uint32
		if _, err := fmt.Sscanf(f[1]+" "+f[7], "%x %x", &dst, &mask); err != nil {
			continue
		}
		// Little-endian hex, as the kernel prints it.
		ip := net.IPv4(byte(dst), byte(dst>>8), byte(dst>>16), byte(dst>>24))
		m := net.IPv4Mask(byte(mask), byte(mask>>8), byte(mask>>16), byte(mask>>24))
		out = append(out, &net.IPNet{IP: ip.Mask(m), Mask: m})
	}
	return out
}
