package cri

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Implementation names for Options.Type.
const (
	// TypeAuto picks containerd-cri when the endpoint answers both
	// containerd's own API and CRI, the native client when it answers only
	// containerd's, and CRI otherwise.
	TypeAuto = "auto"
	// TypeNative is the native containerd client ("containerd").
	TypeNative = "containerd"
	// TypeCRI is the CRI RuntimeService over gRPC ("cri").
	TypeCRI = "cri"
	// TypeContainerdCRI runs execs through CRI on containerd and kills and
	// stops through the native client ("containerd-cri"; see ContainerdCRI).
	TypeContainerdCRI = "containerd-cri"
)

// Defaults for Options.
const (
	DefaultEndpoint  = "unix:///run/containerd/containerd.sock"
	DefaultNamespace = "k8s.io"
	// DefaultFIFODir is containerd's own default; the shim must be able to open
	// paths in it, so probed and containerd have to share it (a hostPath mount).
	DefaultFIFODir = "/run/containerd/fifo"
)

// Options select and configure a Runtime. Validate them with New.
type Options struct {
	// Endpoint is the runtime socket, "unix:///path" or "/path".
	Endpoint string
	// Namespace is the containerd namespace (native only); default "k8s.io",
	// where the CRI plugin keeps Kubernetes containers.
	Namespace string
	// Type is "containerd-cri", "containerd", "cri" or "auto" (default).
	Type string
	// FIFODir is where the native client creates exec FIFOs; default DefaultFIFODir.
	FIFODir string
	// DetectTimeout bounds the auto-detection call; default 5s.
	DetectTimeout time.Duration
	// OutputBudget is the node-wide budget, in bytes, of exec output in
	// probed's memory (see outputBudget); default DefaultExecOutputBudget.
	OutputBudget int64
}

// Complete fills in the defaults and checks the options.
func (o *Options) Complete() error {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	path, err := socketPath(o.Endpoint)
	if err != nil {
		return err
	}
	o.Endpoint = "unix://" + path
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	switch o.Type {
	case "":
		o.Type = TypeAuto
	case TypeAuto, TypeNative, TypeCRI, TypeContainerdCRI:
	default:
		return fmt.Errorf("runtime type %q: want %q, %q, %q or %q", o.Type, TypeContainerdCRI, TypeNative, TypeCRI, TypeAuto)
	}
	if o.FIFODir == "" {
		o.FIFODir = DefaultFIFODir
	}
	if !filepath.IsAbs(o.FIFODir) {
		return fmt.Errorf("FIFO dir %q must be absolute", o.FIFODir)
	}
	if o.DetectTimeout <= 0 {
		o.DetectTimeout = 5 * time.Second
	}
	return nil
}

// socketPath accepts "unix:///path" and "/path"; other transports are refused
// because both runtimes listen on a local socket.
func socketPath(endpoint string) (string, error) {
	p := endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		if scheme != "unix" {
			return "", fmt.Errorf("runtime endpoint %q: only unix sockets are supported", endpoint)
		}
		p = rest
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("runtime endpoint %q: want an absolute socket path", endpoint)
	}
	return filepath.Clean(p), nil
}

// TypeNone runs no runtime client: for nodes that only have network probes
// (virtual nodes, or an integration test with no containerd).
const TypeNone = "none"
