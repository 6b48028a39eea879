package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/manifest"
)

// ProbedImage is the image hack/build-probed-image.sh builds (in
// .cache/images/probed.tar) and deploy/ references.
const ProbedImage = "probed:dev"

// ProbedImageArchive is where hack/build-probed-image.sh writes ProbedImage,
// relative to the repository root.
const ProbedImageArchive = ".cache/images/probed.tar"

// fieldManager owns the fields DeployProbed applies (server-side apply).
const fieldManager = "probed-node-harness"

// deployment is what DeployProbed applied, for ProbedPodName.
type deployment struct {
	namespace string
	selector  labels.Selector
}

// DeployProbed applies probed's manifests from deploy/ (the resources its
// kustomization.yaml lists) with server-side apply, and waits until the
// DaemonSet's pod on this node runs image and is Ready: its /readyz passes
// (the pod informer has synced and the runtime answers).
//
// The objects are applied as written, with the patches of the components
// DeployComponents names (of the DaemonSet, deploy/probe-tls; of the
// DaemonSet and the ClusterRole, deploy/pod-source-kubelet), except for
// what only this harness knows: the image
// (IfNotPresent, never pulled); the kubelet's directories under
// /var/lib/kubelet (its pods directory, deploy/probe-tls; its Pods API
// socket's, deploy/pod-source-kubelet) where this node's kubelet keeps
// them, under KubeletRootDir, in hostPath volumes, mounts,
// --pod-volumes-dir and --kubelet-pods-api-socket alike (the socket flag
// is set whenever the pods-api directory is mounted: probed's default
// names /var/lib/kubelet's); --runtime-endpoint naming
// this node's containerd, whose socket directory is mounted at the same path
// (a directory, as the manifest mounts /run/containerd, so that a restart of
// containerd is followed); --metrics-bind-address on 127.0.0.1:<ProbedMetricsPort>, with the
// probes, port and scrape annotation following it; and
// KUBERNETES_SERVICE_HOST/PORT naming the apiserver on loopback, as there is
// no kube-proxy to route the kubernetes Service. The exec FIFO directory
// stays /run/containerd/fifo: the shim opens probed's FIFOs by the path
// probed uses, so it must be the same inside and outside the pod.
//
// extraArgs are added to probed's arguments; a flag already there
// (--status-mode=…) is replaced. Call it again to change them: the
// DaemonSet rolls, and DeployProbed waits for the new pod.
func (n *Node) DeployProbed(ctx context.Context, image string, extraArgs ...string) error {
	if image == "" {
		image = ProbedImage
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
	}
	if err := n.checkImage(ctx, image); err != nil {
		return err
	}
	objs, err := loadManifests(n.opts.DeployDir)
	if err != nil {
		return err
	}
	for _, c := range n.DeployComponents() {
		if !filepath.IsAbs(c) {
			c = filepath.Join(n.opts.DeployDir, c)
		}
		if err := applyComponent(c, objs); err != nil {
			return err
		}
	}
	var ds *appsv1.DaemonSet
	for i, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		if ds != nil {
			return fmt.Errorf("%s: more than one DaemonSet", n.opts.DeployDir)
		}
		ds = &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
			return fmt.Errorf("DaemonSet %s: %w", o.GetName(), err)
		}
		port, err := n.patchDaemonSet(ds, image, extraArgs)
		if err != nil {
			return err
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
		if err != nil {
			return err
		}
		delete(u, "status")
		objs[i] = &unstructured.Unstructured{Object: u}
		n.state.ProbedPort = port
	}
	if ds == nil {
		return fmt.Errorf("%s: no DaemonSet", n.opts.DeployDir)
	}
	if err := n.apply(ctx, objs); err != nil {
		return err
	}
	if err := n.saveState(); err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.deployed = deployment{namespace: ds.Namespace, selector: sel}
	n.mu.Unlock()
	start := time.Now()
	if err := n.waitProbed(ctx, ds.Namespace, ds.Name, sel, image); err != nil {
		return err
	}
	n.logf("probed (%s) Ready in %v, metrics on %s", image, time.Since(start).Round(time.Millisecond), n.ProbedMetricsURL())
	return nil
}

// checkImage asks containerd's CRI, as the kubelet would, whether image is
// there: a pod that may not pull would otherwise sit in ErrImageNeverPull.
func (n *Node) checkImage(ctx context.Context, image string) error {
	conn, err := grpc.NewClient(n.ContainerdEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := runtimeapi.NewImageServiceClient(conn).ImageStatus(ctx, &runtimeapi.ImageStatusRequest{
		Image: &runtimeapi.ImageSpec{Image: image},
	})
	if err != nil {
		return fmt.Errorf("image status of %s: %w", image, err)
	}
	if resp.GetImage() == nil {
		return fmt.Errorf("image %s is not in the node's containerd: build it (hack/build-probed-image.sh) and "+
			"import it first (ImportImage(%s))", image, ProbedImageArchive)
	}
	return nil
}

// patchDaemonSet makes the DaemonSet run on this node (see DeployProbed) and
// returns probed's metrics port.
func (n *Node) patchDaemonSet(ds *appsv1.DaemonSet, image string, extraArgs []string) (int, error) {
	spec := &ds.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "probed" || c == nil {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		return 0, errors.New("the DaemonSet has no container")
	}
	c.Image = image
	c.ImagePullPolicy = corev1.PullIfNotPresent

	moveKubeletRoot(spec, c, n.KubeletRootDir())
	if err := movePodNetnsDir(spec, c, n.PodNetnsDir()); err != nil {
		return 0, err
	}

	// The socket: the manifest's path becomes this node's, inside and out.
	oldSocket := strings.TrimPrefix(argValue(c.Args, "--runtime-endpoint"), "unix://")
	if oldSocket == "" {
		oldSocket = "/run/containerd/containerd.sock" // probed's default
	}
	newSocket := strings.TrimPrefix(n.ContainerdEndpoint, "unix://")
	c.Args = setArg(c.Args, "--runtime-endpoint", n.ContainerdEndpoint)
	// The manifest mounts the socket's directory (a restart of containerd
	// replaces the socket file). It stays, for the exec FIFOs under
	// /run/containerd/fifo; this node's socket directory is mounted beside
	// it, the same way, at its own path.
	oldDir, newDir := filepath.Dir(oldSocket), filepath.Dir(newSocket)
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == oldSocket {
			return 0, fmt.Errorf("the DaemonSet mounts the socket file %s; mount its directory %s", oldSocket, oldDir)
		}
	}
	dirType := corev1.HostPathDirectory
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "node-containerd-run",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: newDir, Type: &dirType}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "node-containerd-run", MountPath: newDir})

	// Metrics: on loopback, on our port.
	oldPort := DefaultProbedMetricsPort
	if _, p, err := net.SplitHostPort(argValue(c.Args, "--metrics-bind-address")); err == nil {
		if v, err := strconv.Atoi(p); err == nil {
			oldPort = v
		}
	}
	port := n.state.ProbedPort
	c.Args = setArg(c.Args, "--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(port))
	for _, a := range extraArgs {
		name, _, _ := strings.Cut(a, "=")
		c.Args = append(removeArg(c.Args, name), a)
	}
	if _, p, err := net.SplitHostPort(argValue(c.Args, "--metrics-bind-address")); err == nil {
		if v, err := strconv.Atoi(p); err == nil {
			port = v
		}
	}
	for i := range c.Ports {
		if int(c.Ports[i].ContainerPort) == oldPort {
			c.Ports[i].ContainerPort = int32(port)
			c.Ports[i].HostPort = 0 // defaulted from containerPort on the host network
		}
	}
	// The health listener: a free loopback port of its own (another node of
	// this host may hold the manifest's), the kubelet's probes following it.
	oldHealth, newHealth := -1, -1
	if _, p, err := net.SplitHostPort(argValue(c.Args, "--health-bind-address")); err == nil {
		if oldHealth, err = strconv.Atoi(p); err != nil {
			return 0, fmt.Errorf("--health-bind-address: %w", err)
		}
		if newHealth, err = freePort(); err != nil {
			return 0, err
		}
		c.Args = setArg(c.Args, "--health-bind-address", "127.0.0.1:"+strconv.Itoa(newHealth))
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.HTTPGet != nil && p.HTTPGet.Port.Type == intstr.Int && p.HTTPGet.Port.IntValue() == oldPort {
			p.HTTPGet.Port = intstr.FromInt32(int32(port))
		}
		if p.HTTPGet != nil && p.HTTPGet.Port.Type == intstr.Int && p.HTTPGet.Port.IntValue() == oldHealth {
			p.HTTPGet.Port = intstr.FromInt32(int32(newHealth))
		}
		if p.TCPSocket != nil && p.TCPSocket.Port.Type == intstr.Int && p.TCPSocket.Port.IntValue() == oldPort {
			p.TCPSocket.Port = intstr.FromInt32(int32(port))
		}
	}
	if a := ds.Spec.Template.Annotations; a != nil && a["prometheus.io/port"] != "" {
		a["prometheus.io/port"] = strconv.Itoa(port)
	}

	// No kube-proxy: the kubernetes Service's ClusterIP goes nowhere. probed
	// is on the host network, so it reaches the apiserver on loopback; the
	// serving certificate names 127.0.0.1.
	host, apiPort, err := net.SplitHostPort(strings.TrimPrefix(n.cp.Host, "https://"))
	if err != nil {
		return 0, err
	}
	c.Env = setEnv(c.Env, "KUBERNETES_SERVICE_HOST", host)
	c.Env = setEnv(c.Env, "KUBERNETES_SERVICE_PORT", apiPort)
	return port, nil
}

// defaultKubeletRoot is the kubelet's --root-dir on a node with the
// default, under which deploy/'s components mount its directories:
// pods/ (deploy/probe-tls) and pods-api/ (deploy/pod-source-kubelet).
const defaultKubeletRoot = "/var/lib/kubelet"

// defaultKubeletPodsDir is the kubelet's pods directory on a node with
// the default --root-dir, as deploy/probe-tls mounts it.
const defaultKubeletPodsDir = defaultKubeletRoot + "/pods"

// podsAPIDirName and podsAPISocketName are the kubelet's Pods API socket
// (KEP-4188): <root-dir>/pods-api/pods-api.sock.
const (
	podsAPIDirName    = "pods-api"
	podsAPISocketName = "pods-api.sock"
)

// KubeletRootDir is this node's kubelet's --root-dir: <RunDir>/kubelet/root.
func (n *Node) KubeletRootDir() string { return filepath.Join(n.RunDir, "kubelet", "root") }

// KubeletPodsDir is where this node's kubelet keeps its pods' volumes:
// <RunDir>/kubelet/root/pods, its --root-dir's pods/.
func (n *Node) KubeletPodsDir() string { return filepath.Join(n.KubeletRootDir(), "pods") }

// KubeletPodsAPISocket is where this node's kubelet serves its Pods API
// (from 1.37, or 1.36 with the PodsAPI gate): <RunDir>/kubelet/root/pods-api/pods-api.sock.
func (n *Node) KubeletPodsAPISocket() string {
	return filepath.Join(n.KubeletRootDir(), podsAPIDirName, podsAPISocketName)
}

// underKubeletRoot returns path moved from /var/lib/kubelet to root, and
// whether it was there.
func underKubeletRoot(path, root string) (string, bool) {
	if path == defaultKubeletRoot {
		return root, true
	}
	if rest, ok := strings.CutPrefix(path, defaultKubeletRoot+"/"); ok {
		return filepath.Join(root, rest), true
	}
	return path, false
}

// moveKubeletRoot moves what spec and its container c read of the
// kubelet's directories under /var/lib/kubelet to root: the host paths,
// the mount paths (the same, as the components mount them),
// --pod-volumes-dir and --kubelet-pods-api-socket. When the pods-api
// directory is mounted, --kubelet-pods-api-socket names the socket in it
// even where the manifest leaves the flag to its default, which is
// /var/lib/kubelet's.
func moveKubeletRoot(spec *corev1.PodSpec, c *corev1.Container, root string) {
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			hp.Path, _ = underKubeletRoot(hp.Path, root)
		}
	}
	podsAPIDir := filepath.Join(root, podsAPIDirName)
	mountsPodsAPI := false
	for i := range c.VolumeMounts {
		c.VolumeMounts[i].MountPath, _ = underKubeletRoot(c.VolumeMounts[i].MountPath, root)
		mountsPodsAPI = mountsPodsAPI || c.VolumeMounts[i].MountPath == podsAPIDir
	}
	for _, flag := range []string{"--pod-volumes-dir", "--kubelet-pods-api-socket"} {
		if v, ok := underKubeletRoot(argValue(c.Args, flag), root); ok {
			c.Args = setArg(c.Args, flag, v)
		}
	}
	if mountsPodsAPI {
		c.Args = setArg(c.Args, "--kubelet-pods-api-socket", filepath.Join(podsAPIDir, podsAPISocketName))
	}
}

// componentPatch is one of a kustomize component's patches[].
type componentPatch struct {
	Target struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
		Name    string `json:"name"`
	} `json:"target"`
	Patch string `json:"patch"`
	Path  string `json:"path"`
}

// applyComponent applies the kustomize component in dir to objs, deploy/'s
// objects: each of its patches, JSON 6902 operations inline (kustomize's
// patches[].patch), to the one object of objs it targets by kind and name
// (and group and version, where it names them, as kustomize matches them):
// probed's DaemonSet (deploy/probe-tls), its ClusterRole too
// (deploy/pod-source-kubelet). A failed "test" operation fails it, as it
// fails kustomize. Anything else a component may hold (resources, patch
// files, strategic merge patches, other selectors, a target that is not
// exactly one of objs) is refused, rather than left out.
func applyComponent(dir string, objs []*unstructured.Unstructured) error {
	file := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var k struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Resources  []string         `json:"resources"`
		Patches    []componentPatch `json:"patches"`
	}
	// Strict: a field this function does not know is one it would not apply.
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return fmt.Errorf("%s: %w (the harness applies only inline JSON patches of deploy/'s objects)", file, err)
	}
	if k.Kind != "Component" || len(k.Resources) > 0 {
		return fmt.Errorf("%s: a Component with patches alone, please (kind %q, resources %v)", file, k.Kind, k.Resources)
	}
	for i, p := range k.Patches {
		t := p.Target
		var target *unstructured.Unstructured
		matches := 0
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			if t.Kind == gvk.Kind && t.Name == o.GetName() &&
				(t.Group == "" || t.Group == gvk.Group) && (t.Version == "" || t.Version == gvk.Version) {
				target = o
				matches++
			}
		}
		if p.Path != "" || p.Patch == "" || t.Kind == "" || t.Name == "" || matches != 1 {
			return fmt.Errorf("%s: patch %d is not an inline patch of one of deploy/'s objects by kind and name "+
				"(target %s %s/%s %s, %d of deploy/'s objects match)", file, i, t.Kind, t.Group, t.Version, t.Name, matches)
		}
		ops, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			return fmt.Errorf("%s: patch %d: %w", file, i, err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			return fmt.Errorf("%s: patch %d: %w", file, i, err)
		}
		doc, err := target.MarshalJSON()
		if err != nil {
			return err
		}
		if doc, err = patch.Apply(doc); err != nil {
			return fmt.Errorf("%s: patch %d of %s %s: %w", file, i, t.Kind, t.Name, err)
		}
		if err := target.UnmarshalJSON(doc); err != nil {
			return err
		}
	}
	return nil
}

// argValue returns the value of --name=value in args, or "".
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func removeArg(args []string, name string) []string {
	out := args[:0:0]
	for _, a := range args {
		if a != name && !strings.HasPrefix(a, name+"=") {
			out = append(out, a)
		}
	}
	return out
}

// setArg replaces --name=… in place, or appends it.
func setArg(args []string, name, value string) []string {
	for i, a := range args {
		if strings.HasPrefix(a, name+"=") || a == name {
			out := append([]string{}, args...)
			out[i] = name + "=" + value
			return out
		}
	}
	return append(append([]string{}, args...), name+"="+value)
}

func setEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			env[i] = corev1.EnvVar{Name: name, Value: value}
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: name, Value: value})
}

// loadManifests reads the resources deploy/kustomization.yaml lists (or
// every *.yaml when there is none), one object per YAML document.
func loadManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := manifest.Resources(dir)
	if errors.Is(err, fs.ErrNotExist) {
		files, _ = filepath.Glob(filepath.Join(dir, "*.yaml"))
		sort.Strings(files)
	} else if err != nil {
		return nil, err
	}
	objs, err := manifest.UnstructuredFiles(files...)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no manifests in %s", dir)
	}
	return objs, nil
}

// apply server-side-applies objs in order.
func (n *Node) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	groups, err := restmapper.GetAPIGroupResources(n.client.Discovery())
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(n.RESTConfig())
	if err != nil {
		return err
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return nil
}

// waitProbed waits until the DaemonSet has rolled out and its only pod runs
// image and is Ready.
func (n *Node) waitProbed(ctx context.Context, ns, name string, sel labels.Selector, image string) error {
	var last string
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		ds, err := n.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		st := ds.Status
		last = fmt.Sprintf("DaemonSet generation %d observed %d, desired %d, updated %d, ready %d",
			ds.Generation, st.ObservedGeneration, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady)
		if st.ObservedGeneration < ds.Generation || st.DesiredNumberScheduled < 1 ||
			st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberReady != st.DesiredNumberScheduled {
			return false, nil
		}
		pods, err := n.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(pods.Items) != int(st.DesiredNumberScheduled) {
			last += fmt.Sprintf("; %d pods", len(pods.Items))
			return false, nil
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image || !podReady(&p) {
				last += fmt.Sprintf("; pod %s not ready on %s", p.Name, image)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("probed not ready (%s): %w\n%s", last, err, n.diagnose(context.WithoutCancel(ctx), ns, sel))
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// diagnose describes the pods of sel for an error message: status, events
// and the last lines of each container's log.
func (n *Node) diagnose(ctx context.Context, ns string, sel labels.Selector) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var b strings.Builder
	pods, err := n.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "list pods: " + err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s/%s phase %s node %q\n", ns, p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  container %s ready=%v restarts=%d state=%+v last=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
			tailLines := int64(20)
			logs, err := n.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: &tailLines}).DoRaw(ctx)
			if err == nil {
				fmt.Fprintf(&b, "  log:\n%s\n", indent(string(logs)))
			}
		}
		evs, err := n.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err == nil {
			for _, e := range evs.Items {
				fmt.Fprintf(&b, "  event %s %s: %s\n", e.Type, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// ProbedPodName returns the name of probed's pod on the node (the Ready one
// if a rollout is under way).
func (n *Node) ProbedPodName(ctx context.Context) (string, error) {
	n.mu.Lock()
	d := n.deployed
	n.mu.Unlock()
	if d.selector == nil {
		d = deployment{namespace: "probed-system", selector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "probed"})}
	}
	pods, err := n.client.CoreV1().Pods(d.namespace).List(ctx, metav1.ListOptions{LabelSelector: d.selector.String()})
	if err != nil {
		return "", err
	}
	name := ""
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if podReady(&p) {
			return p.Name, nil
		}
		name = p.Name
	}
	if name == "" {
		return "", fmt.Errorf("no probed pod in %s (DeployProbed first)", d.namespace)
	}
	return name, nil
}

// ProbedNamespace is the namespace probed is deployed in.
func (n *Node) ProbedNamespace() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.deployed.namespace == "" {
		return "probed-system"
	}
	return n.deployed.namespace
}

// ProbedMetricsURL is probed's HTTPS endpoint on the host network, e.g.
// https://127.0.0.1:9809 (/metrics, /healthz, /readyz, /debug/probes). Its
// certificate is self-signed, and /metrics and /debug/probes need a token:
// ProbedGet reads them.
func (n *Node) ProbedMetricsURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(n.state.ProbedPort)
}

func labelsEverything() labels.Selector { return labels.Everything() }
