package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/test/harness/controlplane"
)

// kubeconfigFor writes a kubeconfig for user cn in groups orgs, with a client
// certificate signed by the control plane's CA, and returns its path.
func (n *Node) kubeconfigFor(file, cn string, orgs ...string) (string, error) {
	certPEM, keyPEM, err := n.cp.IssueClientCert(cn, orgs...)
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(n.cp.CAFile)
	if err != nil {
		return "", err
	}
	path := filepath.Join(n.RunDir, file)
	cfg := &rest.Config{Host: n.cp.Host, TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: certPEM, KeyData: keyPEM}}
	return path, controlplane.WriteKubeconfig(path, cfg)
}

// startControllers starts kube-controller-manager and kube-scheduler as
// kubeadm configures them (their own users, bootstrap RBAC; each controller
// with its own service account), on free loopback ports, without leader
// election.
func (n *Node) startControllers() error {
	kcmConfig, err := n.kubeconfigFor("kube-controller-manager.kubeconfig", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	schedConfig, err := n.kubeconfigFor("kube-scheduler.kubeconfig", "system:kube-scheduler")
	if err != nil {
		return err
	}
	kcmPort, err := freePort()
	if err != nil {
		return err
	}
	schedPort, err := freePort()
	if err != nil {
		return err
	}
	kcm, err := startProcess(n.RunDir, kcmName, filepath.Join(n.opts.BinDir, kcmName), []string{
		"--kubeconfig=" + kcmConfig,
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + n.cp.SAKeyFile(),
		"--root-ca-file=" + n.cp.CAFile,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(kcmPort),
		// Its self-signed serving certificate; the default is /var/run/kubernetes.
		"--cert-dir=" + filepath.Join(n.RunDir, "kube-controller-manager-certs"),
		"--v=1",
	}, n.opts.Detach)
	if err != nil {
		return err
	}
	n.setProc(kcmName, kcm)
	sched, err := startProcess(n.RunDir, schedName, filepath.Join(n.opts.BinDir, schedName), []string{
		"--kubeconfig=" + schedConfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(schedPort),
		"--cert-dir=" + filepath.Join(n.RunDir, "kube-scheduler-certs"),
		"--v=1",
	}, n.opts.Detach)
	if err != nil {
		return err
	}
	n.setProc(schedName, sched)
	n.logf("kube-controller-manager and kube-scheduler started")
	return nil
}

// startKubelet writes the kubelet's configuration and starts it.
func (n *Node) startKubelet() error {
	dir := filepath.Join(n.RunDir, "kubelet")
	for _, d := range []string{"root", "pki", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	kubeconfig, err := n.kubeconfigFor(filepath.Join("kubelet", "kubeconfig"), "system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	healthzPort, err := freePort()
	if err != nil {
		return err
	}
	n.state.KubeletPort = port
	cfg := n.kubeletConfig(dir, port, healthzPort)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(dir, "root"),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		// Not --node-ip=127.0.0.1, which the kubelet refuses as loopback: named
		// 127.0.0.1, it publishes InternalIP 127.0.0.1, so logs and exec work.
		"--hostname-override=" + n.Name,
		"--v=2",
	}
	args = append(args, n.opts.KubeletFlags...)
	n.kubeletArgs = args
	p, err := startProcess(n.RunDir, kubeletName, filepath.Join(n.opts.BinDir, kubeletName), args, n.opts.Detach)
	if err != nil {
		return err
	}
	n.setProc(kubeletName, p)
	n.logf("kubelet started (port %d, pod subnet %s on bridge %s)", port, n.PodSubnet, n.Bridge)
	return nil
}

// RestartKubelet stops the kubelet (SIGTERM, as a service manager's restart
// does) and starts it again with the same command line and configuration,
// ports included. The pods' containers keep running in containerd. It
// returns once the new process runs, not when it is ready.
func (n *Node) RestartKubelet() error {
	p := n.proc(kubeletName)
	if p == nil || n.kubeletArgs == nil {
		return errors.New("the kubelet was not started")
	}
	if err := p.Stop(15 * time.Second); err != nil {
		return err
	}
	np, err := startProcess(n.RunDir, kubeletName, filepath.Join(n.opts.BinDir, kubeletName), n.kubeletArgs, n.opts.Detach)
	if err != nil {
		return err
	}
	n.setProc(kubeletName, np)
	n.logf("kubelet restarted")
	return nil
}

// kubeletConfig is a KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
// for this machine: cgroup v1 with cgroupfs, possibly swap, possibly a
// nearly full disk, no iptables, everything under the run dir.
func (n *Node) kubeletConfig(dir string, port, healthzPort int) map[string]any {
	return map[string]any{
		"kind":       "KubeletConfiguration",
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		// Serving: loopback only. The apiserver reaches it for logs, exec and
		// port-forward with its kubelet client certificate (system:masters),
		// authenticated by our CA and authorised through SubjectAccessReview.
		"address":            "127.0.0.1",
		"port":               port,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        healthzPort,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true, "cacheTTL": "10s"},
			"x509":      map[string]any{"clientCAFile": n.cp.CAFile},
		},
		"authorization": map[string]any{
			"mode":    "Webhook",
			"webhook": map[string]any{"cacheAuthorizedTTL": "10s", "cacheUnauthorizedTTL": "5s"},
		},
		"containerRuntimeEndpoint": n.ContainerdEndpoint,
		"cgroupDriver":             "cgroupfs",
		// Our own cgroup root, shared with the containerd harness, which
		// sweeps it on Stop; /kubepods would clash with a second node.
		"cgroupRoot":    n.state.CgroupParent,
		"cgroupsPerQOS": true,
		// Kubelets from 1.35 refuse to start on cgroup v1 (KEP-5573) unless
		// told otherwise; these machines have only v1 controllers. Test node
		// only: a production node should move to cgroup v2.
		"failCgroupV1":    false,
		"failSwapOn":      false,
		"podLogsDir":      filepath.Join(dir, "pod-logs"),
		"volumePluginDir": filepath.Join(dir, "volume-plugins"),
		// No KUBE-FIREWALL or other chains in the host's iptables.
		"makeIPTablesUtilChains": false,
		// Disks here can be nearly full: evict only when really out of space,
		// and never garbage-collect images (there is no registry to pull
		// them back from).
		"evictionHard": map[string]string{
			"memory.available":   "50Mi",
			"nodefs.available":   "100Mi",
			"nodefs.inodesFree":  "1%",
			"imagefs.available":  "100Mi",
			"imagefs.inodesFree": "1%",
		},
		"evictionPressureTransitionPeriod": "10s",
		"imageGCHighThresholdPercent":      100,
		"imageGCLowThresholdPercent":       99,
		"imageMinimumGCAge":                "24h",
		"serializeImagePulls":              false,
		"resolvConf":                       "/etc/resolv.conf",
		"clusterDomain":                    "cluster.local",
		// Where a cluster DNS Service would be. None runs (pods have no
		// route there either), but without it the kubelet warns
		// MissingClusterDNS on every pod sync, burying probed's events in
		// kubectl describe.
		"clusterDNS": []string{"10.96.0.10"},
		// Report status changes quickly: Start waits for Ready.
		"nodeStatusUpdateFrequency": "2s",
		"syncFrequency":             "10s",
		// Nothing to take over from systemd-logind here.
		"shutdownGracePeriod":             "0s",
		"shutdownGracePeriodCriticalPods": "0s",
		"containerLogMaxSize":             "10Mi",
		"containerLogMaxFiles":            2,
		"rotateCertificates":              false,
		"serverTLSBootstrap":              false,
	}
}

// cgroupHierarchies lists the cgroup v1 hierarchies (and the v2 one on a
// unified host) mounted under /sys/fs/cgroup.
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	if len(out) == 0 {
		out = []string{"/sys/fs/cgroup"}
	}
	return out
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy: the
// kubelet refuses a cgroupRoot that is missing from any of them. A new
// cpuset cgroup starts with no CPUs or memory nodes; it gets its parent's.
func makeCgroupRoot(parent string) error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		// cgroup v2: one hierarchy, controllers come from the parent.
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", parent), 0o755)
	}
	for _, h := range cgroupHierarchies() {
		if filepath.Base(h) == "unified" {
			continue
		}
		dir := filepath.Join(h, parent)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroupTree removes parent and everything below it in every
// hierarchy, deepest first. Any process still inside is killed first (there
// is none after a clean stop: the containerd harness has removed the pods).
func removeCgroupTree(parent string) error {
	var dirs []string
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, parent)
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// StopControlPlane stops kube-scheduler, kube-controller-manager and
// kube-apiserver, each by its PID: a control-plane outage as a node sees
// it. etcd keeps the state; the kubelet, containerd and the pods keep
// running. StartControlPlane ends it.
func (n *Node) StopControlPlane() error {
	var errs []error
	for _, name := range []string{schedName, kcmName} {
		if p := n.proc(name); p != nil {
			errs = append(errs, p.Stop(10*time.Second))
		}
	}
	errs = append(errs, n.cp.StopAPIServer())
	n.logf("control plane stopped (etcd kept)")
	return errors.Join(errs...)
}

// StartControlPlane ends StopControlPlane: kube-apiserver starts again on
// its port, with the same certificates and flags (retried for up to 30 s
// while another process holds the port for a moment, as an outgoing
// connection's ephemeral port may), and once it is ready
// kube-controller-manager and kube-scheduler start anew. Without leader
// election they are at work at once; the controller-manager's node
// lifecycle controller starts from a fresh view of the node's lease, as
// it would after a restart of the whole control plane.
func (n *Node) StartControlPlane(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := n.cp.StartAPIServer(ctx)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "port already in use") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second) // pace the retries
	}
	if err := n.startControllers(); err != nil {
		return err
	}
	n.logf("control plane started again")
	return nil
}
