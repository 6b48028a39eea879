// Package node starts a real single-node Kubernetes cluster on loopback for
// the end-to-end tier and the demo: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, a private containerd with a CNI
// bridge, and a kubelet registered as node "127.0.0.1". probed is deployed
// onto it from deploy/ by DeployProbed.
//
// Everything lives in one run dir (state, sockets, certificates, logs: one
// <component>.log each), and every process started has a PID file there, so
// a node started by one process (the demo) can be stopped by another
// (StopRunDir). Nothing is stopped by name.
//
// What a node changes outside its run dir, and undoes on Stop: a Linux bridge
// for its pod subnet (10.244.<n>.0/24, no masquerading, no routes beyond
// it), the sysctls the kubelet and the bridge set (restored when the last
// node on the machine stops), cgroups under /probed-node-<id>, the kubelet's
// symlinks in /var/log/containers. probed's DaemonSet mounts the host's
// /run/containerd (where it creates its exec FIFOs, fifo/): it is created
// if missing, mode 0711 as containerd itself makes it, and left in place.
//
// Prerequisites: hack/install-deps.sh, hack/build-k8s.sh, hack/build-images.sh
// and, for DeployProbed, hack/build-probed-image.sh. Start returns an error
// wrapping controlplane.ErrBinaryMissing or containerd.ErrMissingBinaries
// when something is not there. Root is required.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/test/harness/containerd"
	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/proc"
	"github.com/probed-dev/probed/test/harness/repo"
)

// NodeName is the node's name, and its InternalIP: the kubelet runs with
// --hostname-override=127.0.0.1 and no --node-ip (which refuses loopback).
const NodeName = "127.0.0.1"

// DefaultProbedMetricsPort is probed's documented --metrics-bind-address port.
const DefaultProbedMetricsPort = 9809

// Options configure Start. The zero value is what tests want.
type Options struct {
	// RunDir holds everything. Default: a new temporary directory, removed
	// by Stop. A given directory is kept by Stop (the demo's .cache/demo),
	// with the logs in it.
	RunDir string
	// KubeletFlags are appended to the kubelet's command line.
	KubeletFlags []string
	// ExtraAPIServerFlags are appended to kube-apiserver's command line.
	ExtraAPIServerFlags []string
	// Detach lets the processes outlive the process that called Start: they
	// get their own session and no parent-death signal. Stop them with
	// StopRunDir(RunDir). Without it, a test binary that dies takes the
	// control plane and the kubelet with it, and the next Start sweeps up
	// its containerd.
	Detach bool
	// BinDir holds the Kubernetes binaries; default controlplane.BinDir().
	BinDir string
	// ImageDir holds the image archives; default <repo>/.cache/images.
	ImageDir string
	// Images are archive base names in ImageDir imported at start; default
	// busybox, busybox-stopsignal and pause (hack/build-images.sh).
	Images []string
	// DeployDir holds probed's manifests; default <repo>/deploy.
	DeployDir string
	// DeployComponents names kustomize components, in DeployDir
	// ("probe-tls", "pod-source-kubelet") or by absolute path, whose inline
	// JSON patches of deploy/'s objects (probed's DaemonSet, its
	// ClusterRole) DeployProbed applies too, every time, until
	// SetDeployComponents changes them. Components with resources of their
	// own (pdb-restarts' RBAC) are refused: apply those yourself.
	DeployComponents []string
	// ProbedMetricsPort is the port DeployProbed gives probed's
	// --metrics-bind-address (on 127.0.0.1: probed runs on the host
	// network). Default 9809 when it is free and no other node on the
	// machine has it, else a free port. A given port must be free.
	ProbedMetricsPort int
	// StartTimeout bounds Start; default 3 minutes (ctx may end it sooner).
	StartTimeout time.Duration
	// Logf, when set, receives progress lines ("kubelet started", ...).
	Logf func(format string, args ...any)
}

// Node is a running single-node cluster.
type Node struct {
	// Name is the Node object's name, NodeName.
	Name string
	// KubeconfigPath is an admin (system:masters) kubeconfig: RunDir/kubeconfig.
	KubeconfigPath string
	// RunDir holds all state and the logs: kube-apiserver.log and etcd.log
	// in controlplane/, containerd.log in containerd/ (moved to RunDir when
	// a kept RunDir's node stops), kube-controller-manager.log,
	// kube-scheduler.log, kubelet.log, and the pods' logs in
	// kubelet/pod-logs/.
	RunDir string
	// ContainerdEndpoint is the node's containerd, unix://…/containerd.sock.
	ContainerdEndpoint string
	// PodSubnet is the pod network (a /24 on the bridge Bridge).
	PodSubnet string
	// Bridge is the pod network's Linux bridge.
	Bridge string

	opts      Options
	state     nodeState
	removeDir bool
	cp        *controlplane.ControlPlane
	ctrd      *containerd.Containerd
	client    kubernetes.Interface

	mu         sync.Mutex // guards procs, deployed and components
	procs      map[string]*proc.Process
	deployed   deployment
	components []string

	stopOnce sync.Once
	stopErr  error

	// kubeletArgs is the kubelet's command line, for RestartKubelet.
	kubeletArgs []string
}

// nodeState is RunDir/node.json: what StopRunDir needs to clean up after a
// node whose starting process is gone.
type nodeState struct {
	ID           string `json:"id"`
	Owner        int    `json:"owner"`     // PID of the process that called Start
	Temporary    bool   `json:"temporary"` // run dir made by Start; swept when Owner is gone
	Detached     bool   `json:"detached"`
	Bridge       string `json:"bridge"`
	PodSubnet    string `json:"podSubnet"`
	CgroupParent string `json:"cgroupParent"`
	APIServer    string `json:"apiServer"`
	KubeletPort  int    `json:"kubeletPort"`
	ProbedPort   int    `json:"probedMetricsPort"`
}

const (
	stateFile     = "node.json"
	tempDirPrefix = "probed-node-"
	kubeletName   = "kubelet"
	kcmName       = "kube-controller-manager"
	schedName     = "kube-scheduler"
)

// Start starts the node and waits until the Node is Ready (and no longer
// tainted not-ready) and kube-controller-manager is at work (kube-system's
// default ServiceAccount exists). ctx bounds the start only. On error
// everything already started is stopped, and the error carries the tail of
// the failing component's log.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	began := time.Now()
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("node harness: must run as root (kubelet, containerd, CNI)")
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	sweepStale()
	n := &Node{Name: NodeName, opts: opts, procs: map[string]*proc.Process{}, components: append([]string(nil), opts.DeployComponents...)}
	if n.RunDir = opts.RunDir; n.RunDir == "" {
		if n.RunDir, err = os.MkdirTemp("", tempDirPrefix); err != nil {
			return nil, err
		}
		n.removeDir = true
	} else {
		if n.RunDir, err = filepath.Abs(n.RunDir); err != nil {
			return nil, err
		}
		if err := prepareRunDir(n.RunDir); err != nil {
			return nil, err
		}
	}
	n.KubeconfigPath = filepath.Join(n.RunDir, "kubeconfig")
	id := randomHex(4)
	n.state = nodeState{
		ID: id, Owner: os.Getpid(), Temporary: n.removeDir, Detached: opts.Detach,
		Bridge: "probed" + id, CgroupParent: "/probed-node-" + id,
	}
	n.Bridge = n.state.Bridge
	defer func() {
		if err != nil {
			_ = n.Stop()
		}
	}()
	// node.json first: from here on, StopRunDir can undo whatever follows.
	if err := n.saveState(); err != nil {
		return nil, err
	}
	if n.state.PodSubnet, n.state.ProbedPort, err = register(id, n.RunDir, opts.ProbedMetricsPort); err != nil {
		return nil, fmt.Errorf("register the node on this machine: %w", err)
	}
	n.PodSubnet = n.state.PodSubnet
	if err := n.saveState(); err != nil {
		return nil, err
	}

	// The control plane and containerd do not need each other: start both at once.
	var wg sync.WaitGroup
	var cpErr, ctrdErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.Now()
		n.cp, cpErr = controlplane.Start(ctx, controlplane.Options{
			BinDir:              opts.BinDir,
			RunDir:              filepath.Join(n.RunDir, "controlplane"),
			ExtraAPIServerFlags: opts.ExtraAPIServerFlags,
			Detached:            opts.Detach,
			StartTimeout:        opts.StartTimeout,
		})
		if cpErr == nil {
			n.logf("etcd and kube-apiserver ready in %v", time.Since(t).Round(time.Millisecond))
		}
	}()
	go func() {
		defer wg.Done()
		t := time.Now()
		n.ctrd, ctrdErr = n.startContainerd(ctx)
		if ctrdErr == nil {
			n.logf("containerd ready with images %v in %v", opts.Images, time.Since(t).Round(time.Millisecond))
		}
	}()
	wg.Wait()
	if err := errors.Join(cpErr, ctrdErr); err != nil {
		return nil, err
	}
	n.client = n.cp.Client()
	n.ContainerdEndpoint = n.ctrd.Endpoint()
	n.state.APIServer = n.cp.Host
	if err := controlplane.WriteKubeconfig(n.KubeconfigPath, n.cp.RESTConfig()); err != nil {
		return nil, err
	}

	if err := n.startControllers(); err != nil {
		return nil, err
	}
	if err := n.startKubelet(); err != nil {
		return nil, err
	}
	if err := n.saveState(); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	n.logf("node %s Ready in %v (run dir %s)", n.Name, time.Since(began).Round(time.Millisecond), n.RunDir)
	return n, nil
}

func (o *Options) complete() error {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.BinDir == "" {
		d, err := controlplane.BinDir()
		if err != nil {
			return err
		}
		o.BinDir = d
	}
	if o.ImageDir == "" || o.DeployDir == "" {
		root, err := repo.Root()
		if err != nil {
			return err
		}
		if o.ImageDir == "" {
			o.ImageDir = filepath.Join(root, ".cache", "images")
		}
		if o.DeployDir == "" {
			o.DeployDir = filepath.Join(root, "deploy")
		}
	}
	if len(o.Images) == 0 {
		o.Images = []string{"busybox", "busybox-stopsignal", "pause"}
	}
	for _, b := range []string{kcmName, schedName, kubeletName} {
		p := filepath.Join(o.BinDir, b)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%w: %s (run hack/build-k8s.sh)", controlplane.ErrBinaryMissing, p)
		}
	}
	return nil
}

// hostRuntimeDir is the host's /run/containerd, which probed's DaemonSet
// mounts. On a real node containerd makes it (0711); here the node's
// containerd keeps its state elsewhere and only shims create it, through
// /run/containerd/s, with 0600, which nobody without CAP_DAC_OVERRIDE (as
// probed runs) could enter.
const hostRuntimeDir = "/run/containerd"

func prepareHostRuntimeDir() error {
	if err := os.MkdirAll(hostRuntimeDir, 0o711); err != nil {
		return err
	}
	return os.Chmod(hostRuntimeDir, 0o711)
}

func (n *Node) startContainerd(ctx context.Context) (*containerd.Containerd, error) {
	if err := prepareHostRuntimeDir(); err != nil {
		return nil, fmt.Errorf("preparing %s: %w", hostRuntimeDir, err)
	}
	if err := makeCgroupRoot(n.state.CgroupParent); err != nil {
		return nil, fmt.Errorf("cgroup root for the kubelet: %w", err)
	}
	conf, err := cniConfList("probed-"+n.state.ID, n.state.Bridge, n.state.PodSubnet, filepath.Join(n.RunDir, "cni-ipam"))
	if err != nil {
		return nil, err
	}
	return containerd.Start(ctx, containerd.Options{
		RunDir:       filepath.Join(n.RunDir, "containerd"),
		CgroupParent: n.state.CgroupParent,
		CNIConfList:  conf,
		ImageDir:     n.opts.ImageDir,
		Images:       n.opts.Images,
		StartTimeout: n.opts.StartTimeout,
	})
}

// waitReady waits for the Node to be Ready and untainted, and for
// kube-controller-manager to have made kube-system's default ServiceAccount.
func (n *Node) waitReady(ctx context.Context) error {
	var last string
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		for _, name := range []string{kubeletName, kcmName, schedName} {
			if p := n.proc(name); p != nil {
				if done, _ := p.Exited(); done {
					return false, p.Failure("%s exited while the node was starting", name)
				}
			}
		}
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = "node: " + err.Error()
			return false, nil
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
				last = fmt.Sprintf("node Ready=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		if !ready {
			return false, nil
		}
		for _, t := range node.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady {
				last = "node still has the " + t.Key + " taint"
				return false, nil
			}
		}
		if _, err := n.client.CoreV1().ServiceAccounts("kube-system").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "kube-system/default ServiceAccount (made by kube-controller-manager): " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil && ctx.Err() != nil {
		return n.proc(kubeletName).Failure("node %s not ready (last: %s): %v", n.Name, last, err)
	}
	return err
}

// DeployComponents are the components the next DeployProbed applies:
// Options.DeployComponents, or what SetDeployComponents set last.
func (n *Node) DeployComponents() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.components...)
}

// SetDeployComponents replaces the components DeployProbed applies from
// its next call on (see Options.DeployComponents): a test that picks them
// by the kubelet's version, or redeploys probed otherwise for a while.
func (n *Node) SetDeployComponents(components ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.components = append([]string(nil), components...)
}

// Client is an admin clientset.
func (n *Node) Client() kubernetes.Interface { return n.client }

// RESTConfig is a copy of the admin rest.Config.
func (n *Node) RESTConfig() *rest.Config { return n.cp.RESTConfig() }

// ControlPlane is the node's etcd and kube-apiserver harness (tokens for
// service accounts, client certificates, StopAPIServer for outage tests).
func (n *Node) ControlPlane() *controlplane.ControlPlane { return n.cp }

// Containerd is the node's containerd harness (CRI client, exec, status).
func (n *Node) Containerd() *containerd.Containerd { return n.ctrd }

// ImportImage imports a docker-archive into containerd's k8s.io namespace,
// where the kubelet finds it without pulling. Pods must use
// imagePullPolicy Never or IfNotPresent, with the exact name in the archive
// (an image tagged :latest defaults to Always, which fails here).
func (n *Node) ImportImage(ctx context.Context, dockerArchive string) error {
	return containerd.ImportArchive(ctx, strings.TrimPrefix(n.ContainerdEndpoint, "unix://"), dockerArchive)
}

// Stop stops everything by PID: the kubelet, then the pods (through CRI) and
// containerd, the controllers, the apiserver and etcd. It then deletes the
// pod bridge, unmounts what is left under RunDir, removes the node's cgroups
// and /var/log/containers links, restores the sysctls if this was the last
// node on the machine, and removes RunDir if Start created it. Safe to call
// more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop() })
	return n.stopErr
}

func (n *Node) stop() error {
	var errs []error
	if p := n.proc(kubeletName); p != nil {
		errs = append(errs, p.Stop(15*time.Second))
	}
	if !n.removeDir {
		keepContainerdLog(n.RunDir)
	}
	if n.ctrd != nil {
		errs = append(errs, n.ctrd.Stop())
	} else {
		// Start may have failed half-way through containerd's start.
		errs = append(errs, containerd.StopRunDir(filepath.Join(n.RunDir, "containerd")))
	}
	for _, name := range []string{kcmName, schedName} {
		if p := n.proc(name); p != nil {
			errs = append(errs, p.Stop(10*time.Second))
		}
	}
	if n.cp != nil {
		errs = append(errs, n.cp.Stop())
	} else {
		errs = append(errs, stopControlPlaneFiles(n.RunDir))
	}
	errs = append(errs, cleanupHost(n.RunDir, n.state))
	err := errors.Join(errs...)
	if err == nil {
		// Nothing of the node is left but its files.
		_ = os.Remove(filepath.Join(n.RunDir, stateFile))
	}
	if n.removeDir {
		err = errors.Join(err, removeRunDir(n.RunDir))
	}
	return err
}

func (n *Node) proc(name string) *proc.Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.procs[name]
}

func (n *Node) setProc(name string, p *proc.Process) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.procs[name] = p
}

func (n *Node) saveState() error {
	b, err := json.MarshalIndent(n.state, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(n.RunDir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(n.RunDir, stateFile))
}

func readState(runDir string) (nodeState, error) {
	var st nodeState
	b, err := os.ReadFile(filepath.Join(runDir, stateFile))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func (n *Node) logf(format string, args ...any) {
	if n.opts.Logf != nil {
		n.opts.Logf(format, args...)
	}
}

// StopRunDir stops a node that an earlier process started in runDir
// (Options.Detach), from the PID files and node.json there, and undoes its
// changes to the machine as Stop does. It leaves runDir itself in place,
// with the logs, but without node.json. A runDir without node.json is an
// error.
func StopRunDir(runDir string) error {
	runDir, err := filepath.Abs(runDir)
	if err != nil {
		return err
	}
	st, err := readState(runDir)
	if err != nil {
		return fmt.Errorf("no node in %s: %w", runDir, err)
	}
	marker := runDir + "/"
	var errs []error
	errs = append(errs, stopPIDFile(filepath.Join(runDir, kubeletName+".pid"), marker, 15*time.Second))
	keepContainerdLog(runDir)
	errs = append(errs, containerd.StopRunDir(filepath.Join(runDir, "containerd")))
	for _, name := range []string{kcmName, schedName} {
		errs = append(errs, stopPIDFile(filepath.Join(runDir, name+".pid"), marker, 10*time.Second))
	}
	errs = append(errs, stopControlPlaneFiles(runDir))
	errs = append(errs, cleanupHost(runDir, st))
	err = errors.Join(errs...)
	if err == nil {
		_ = os.Remove(filepath.Join(runDir, stateFile))
	}
	return err
}

// keepContainerdLog moves containerd's log out of the containerd harness's
// dir, which its Stop removes, into runDir. containerd keeps writing to it
// until it stops: a rename does not close its descriptor.
func keepContainerdLog(runDir string) {
	_ = os.Rename(filepath.Join(runDir, "containerd", "containerd.log"), filepath.Join(runDir, "containerd.log"))
}

// stopControlPlaneFiles stops kube-apiserver, then etcd, by the PID files
// the control-plane harness writes.
func stopControlPlaneFiles(runDir string) error {
	cpDir := filepath.Join(runDir, "controlplane")
	return errors.Join(
		stopPIDFile(filepath.Join(cpDir, "kube-apiserver.pid"), runDir+"/", 15*time.Second),
		stopPIDFile(filepath.Join(cpDir, "etcd.pid"), runDir+"/", 10*time.Second),
	)
}

// cleanupHost undoes a stopped node's changes outside its processes.
func cleanupHost(runDir string, st nodeState) error {
	var errs []error
	errs = append(errs, deleteBridge(st.Bridge))
	errs = append(errs, removeContainerLogLinks(runDir))
	errs = append(errs, containerd.UnmountAll(runDir))
	if st.CgroupParent != "" {
		errs = append(errs, removeCgroupTree(st.CgroupParent))
	}
	if st.ID != "" {
		errs = append(errs, unregister(st.ID))
	}
	return errors.Join(errs...)
}

// prepareRunDir creates a given run dir, or clears what a stopped node left
// in it (a reused dir would hand etcd an old database with new keys). It
// refuses a dir where a node may still run, and removes only the names a
// node creates.
func prepareRunDir(runDir string) error {
	if _, err := os.Stat(filepath.Join(runDir, stateFile)); err == nil {
		return fmt.Errorf("%s holds a node that may still run: StopRunDir it first", runDir)
	}
	if m := mountsUnder(runDir); len(m) > 0 {
		return fmt.Errorf("%s has mounts left: %v", runDir, m)
	}
	for _, pattern := range []string{"controlplane", "containerd", "kubelet", "cni-ipam", "*-certs",
		"kubeconfig", "*.kubeconfig", "*.log", "*.pid", stateFile + ".tmp"} {
		matches, _ := filepath.Glob(filepath.Join(runDir, pattern))
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return os.MkdirAll(runDir, 0o755)
}

// removeRunDir deletes runDir, but never while anything is still mounted
// below it: RemoveAll would walk into the mount.
func removeRunDir(runDir string) error {
	if m := mountsUnder(runDir); len(m) > 0 {
		return fmt.Errorf("not removing %s: still mounted: %v", runDir, m)
	}
	return os.RemoveAll(runDir)
}

// RemoveRunDir deletes a stopped node's run dir (after StopRunDir), refusing
// while anything is mounted below it.
func RemoveRunDir(runDir string) error {
	runDir, err := filepath.Abs(runDir)
	if err != nil {
		return err
	}
	return removeRunDir(runDir)
}

func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// removeContainerLogLinks removes the kubelet's symlinks in
// /var/log/containers that point into runDir. (The kubelet has no setting
// for that directory.)
func removeContainerLogLinks(runDir string) error {
	entries, err := os.ReadDir("/var/log/containers")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, runDir+"/") {
			_ = os.Remove(p)
		}
	}
	return nil
}

// sweepStale stops the nodes on this machine whose starting process died
// without calling Stop (a panic, go test -timeout, kill -9): its control
// plane and kubelet died with it, but containerd, the pods, the bridge and
// the sysctls stayed. Detached nodes (the demo) are meant to outlive their
// starter and are left alone. A temporary run dir is removed too.
func sweepStale() {
	for _, dir := range registeredRunDirs() {
		st, err := readState(dir)
		if err != nil || st.Detached || st.Owner == 0 || proc.Exists(st.Owner) {
			continue
		}
		fmt.Fprintf(os.Stderr, "node harness: stopping %s, left by process %d\n", dir, st.Owner)
		if err := StopRunDir(dir); err != nil {
			fmt.Fprintf(os.Stderr, "node harness: cleaning up stale %s: %v\n", dir, err)
			continue
		}
		if st.Temporary {
			_ = removeRunDir(dir)
		}
	}
	controlplane.SweepStale()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether nothing listens on port, on any address.
func portFree(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// poll calls cond every interval until it returns true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
