// Package prober runs one probe at a time: exec, HTTP, TCP or gRPC.
// It knows nothing of informers or the API server; callers hand it a
// probe spec, a Target and an EventSink.
package prober

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/probespec"
)

// Result is the outcome of one handler call, as in k8s.io/kubernetes/pkg/probe.
type Result string

const (
	Success Result = "success"
	// Warning is a success the user should hear about (a ProbeWarning event).
	Warning Result = "warning"
	Failure Result = "failure"
	Unknown Result = "unknown"
)

// MaxOutputBytes caps probe output kept in memory: HTTP bodies and exec output (the kubelet's 10 KiB).
const MaxOutputBytes = 10 * 1024

// MaxResponseHeaderBytes caps what probed reads of an answer's head: an
// httpGet probe's (and a preStop httpGet hook's) status line and headers,
// informational answers included, or the header list of an HTTP/2 answer;
// a gRPC probe's headers and trailers. An answer over it fails the probe.
// The kubelet keeps net/http's 10 MB and grpc-go's 16 MiB, which let one
// probe hold megabytes of probed's memory; 32 KiB is more than real
// servers send (nginx and Node.js refuse larger heads from their own
// upstreams at 8 and 16 KiB).
const MaxResponseHeaderBytes = 32 << 10

// maxGRPCAnswerBytes caps a gRPC probe's answer message, a health status
// of a few bytes (grpc-go's default, which the kubelet keeps, is 4 MiB).
const maxGRPCAnswerBytes = 16 << 10

// Target is where a probe runs: what the prober needs to know of the pod and container.
type Target struct {
	// PodIP is the default host for network probes.
	PodIP string
	// PodIPs are all of the pod's IPs (status.podIPs). With PodIP they are
	// the addresses the host policy always allows; see hostpolicy.Guard.
	PodIPs []string
	// PodIPsVerified: PodIPs are the pod's own addresses as the node
	// vouches for them (the runtime's sandbox IPs, or a hostNetwork pod's
	// node addresses), and PodIP, the default host, is allowed as the
	// pod's own only if it is among them. Without it PodIP is too: a
	// writer of pods/status chooses both.
	PodIPsVerified bool
	// ContainerID is runtime-qualified, for example "containerd://<id>".
	ContainerID string
	// Ports are the container's declared ports, for resolving named ports.
	Ports []v1.ContainerPort
	// Env is the container's static environment, for $(VAR) expansion in exec commands.
	Env []v1.EnvVar
	// KeepAlive opts this probe into reusing its connection between runs
	// (a probe's "probed.io/keepAlive": true in the annotation). The
	// kubelet never does; it needs Session.
	KeepAlive bool
	// HTTPCheck is an httpGet probe's response checks (the annotation's
	// "probed.io/expectStatus" and "probed.io/expectBody"); nil keeps the
	// kubelet's rule.
	HTTPCheck *probespec.HTTPCheck
	// PodUID names the pod whose volumes probed.io/tls reads.
	PodUID types.UID
	// TLS is an HTTPS or gRPC probe's "probed.io/tls": verify the server,
	// present a client certificate (tls.go); nil keeps the kubelet's TLS.
	TLS *probespec.TLS
	// Timeout replaces the spec's timeoutSeconds when positive (the
	// annotation's "probed.io/timeoutMilliseconds").
	Timeout time.Duration
	// Session is the worker's reusable state; nil keeps nothing.
	Session *Session
	// FromPod sends a network probe from inside the pod's own network
	// namespace (the annotation's "probed.io/from": "Pod"), to the pod's
	// loopback unless its host names another loopback address. It needs
	// PodNetns.
	FromPod bool
	// PodNetns returns the network namespace of the pod's current sandbox,
	// checked to be the pod's; nil: none can be found, and a FromPod
	// probe errors.
	PodNetns func(ctx context.Context) (*netns.NS, error)

	// ns is PodNetns's answer for one FromPod probe.
	ns *netns.NS
}

// ErrPodNetworkUnsupported marks a probe from inside the pod
// ("probed.io/from": "Pod") that this pod can never have: its runtime runs
// it in a VM or behind a user-space network stack (Kata, gVisor), with no
// network namespace on the node that is the pod's. It raises an
// InvalidProbe Warning, not an errored probe's Unhealthy, and its result
// is discarded as any errored probe's: the container is neither made
// ready nor killed, and no probe is ever sent from elsewhere.
var ErrPodNetworkUnsupported = errors.New("the pod has no network namespace on the node")

// EventSink receives user-facing events already addressed to the probed container.
type EventSink interface {
	Event(eventType, reason, message string)
}

// CommandRunner runs a command inside a container. pkg/cri implements it.
//
// A nil error means the command ran and exitCode is its exit status. output is
// stdout and stderr combined, at most MaxOutputBytes. When the timeout expires
// the error satisfies interface{ Timeout() bool } with Timeout() == true.
type CommandRunner interface {
	ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)
}
