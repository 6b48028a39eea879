package cri

import (
	"context"
	"errors"
	"fmt"
)

// The kubelet's labels on every container and pod sandbox it creates
// (kuberuntime's newContainerLabels and newPodLabels). They override any
// label of the same name from the pod or the image, so they say whose a
// container is.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// Owner is the pod container an exec or a stop is meant for: the one the
// caller (a probe worker) serves, as the API server names it. The
// container ID it comes with is read from the pod's status, which whoever
// may write that status chooses; Verified checks the two against each
// other on the runtime.
type Owner struct {
	PodNamespace, PodName string
	PodUID                string
	// StaticPodUID is a mirror pod's kubernetes.io/config.mirror
	// annotation: the UID of the static pod the kubelet runs, which is
	// the one on its containers. The API server refuses to add or change
	// it after creation.
	StaticPodUID string
	Container    string
}

func (o Owner) String() string {
	return fmt.Sprintf("container %q of pod %s/%s (uid %s)", o.Container, o.PodNamespace, o.PodName, o.PodUID)
}

type ownerKey struct{}

// WithOwner returns ctx carrying the owner its execs and stops are for.
// A probe worker sets it once for its whole life.
func WithOwner(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, o)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok
}

// ErrNoOwner: an exec or stop came without the Owner it is for; Verified
// refuses it, since it could not tell whose container it reaches.
var ErrNoOwner = errors.New("no owning pod container given for the runtime call")

// RuntimeOwner is what the runtime says of a container: its kubelet labels,
// and those of the pod sandbox it runs in.
type RuntimeOwner struct {
	// Labels are the container's, SandboxLabels its sandbox's.
	Labels, SandboxLabels map[string]string
	// KindOK is false when the runtime says the ID is not a pod's
	// container (a sandbox itself, or something not made through CRI).
	KindOK bool
	// SandboxIPs are the IPs the runtime gave the sandbox; none on the
	// host network.
	SandboxIPs []string
	// SandboxNetNS is the path of the network namespace the runtime made
	// for the sandbox (containerd: /var/run/netns/cni-<id>); empty when
	// it made none or does not say.
	SandboxNetNS string
	// SandboxRuntime names the runtime the sandbox runs under, as the
	// runtime says (containerd: io.containerd.runc.v2, or kata's, gVisor's).
	SandboxRuntime string
}

// SandboxNetwork is what the runtime says of the network of the sandbox a
// container runs in.
type SandboxNetwork struct {
	// IPs are the sandbox's IPs, the primary one first.
	IPs []string
	// NetNS is the path of its network namespace; Runtime the runtime it
	// runs under (RuntimeOwner.SandboxNetNS and SandboxRuntime).
	NetNS, Runtime string
}

// OwnerLookup is a Runtime that can say whose a container is. Every
// runtime implementation is one (but none's).
type OwnerLookup interface {
	ContainerOwner(ctx context.Context, containerID string) (RuntimeOwner, error)
}

// Matches reports whether the runtime's labels name o: the container's
// pod UID, namespace, name and container name, and its sandbox's pod UID,
// namespace and name. A UID may be the pod's or, for a mirror pod, its
// static pod's.
func (r RuntimeOwner) Matches(o Owner) bool {
	uidOK := func(uid string) bool {
		return uid != "" && (uid == o.PodUID || (o.StaticPodUID != "" && uid == o.StaticPodUID))
	}
	c, s := r.Labels, r.SandboxLabels
	return r.KindOK &&
		uidOK(c[LabelPodUID]) && c[LabelPodNamespace] == o.PodNamespace && c[LabelPodName] == o.PodName &&
		c[LabelContainerName] == o.Container &&
		s[LabelPodUID] == c[LabelPodUID] && s[LabelPodNamespace] == o.PodNamespace && s[LabelPodName] == o.PodName
}

// Describe is the runtime's side, for the log.
func (r RuntimeOwner) Describe() string {
	return fmt.Sprintf("container %q of pod %s/%s (uid %s), in a sandbox of pod %s/%s (uid %s), CRI container %v",
		r.Labels[LabelContainerName], r.Labels[LabelPodNamespace], r.Labels[LabelPodName], r.Labels[LabelPodUID],
		r.SandboxLabels[LabelPodNamespace], r.SandboxLabels[LabelPodName], r.SandboxLabels[LabelPodUID], r.KindOK)
}

// OwnerMismatchError: the runtime's container is not the one the caller
// serves. Nothing was run or stopped. Its text goes into the pod's events,
// so it names only what the pod's author already knows, never the other
// container's owner (that goes to probed's log).
type OwnerMismatchError struct {
	ContainerID string
	Want        Owner
	Op          string // "exec into" or "stop"
}

func (e *OwnerMismatchError) Error() string {
	return fmt.Sprintf("container ID %s from the pod's status is not container %q of this pod on the container runtime; probed refuses to %s it",
		e.ContainerID, e.Want.Container, e.Op)
}

// OwnerMismatch marks the error for callers that must not import this package.
func (e *OwnerMismatchError) OwnerMismatch() bool { return true }
