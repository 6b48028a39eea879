package probespec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// grpc.mode is upstream's field (KEP-4939, GRPCAction.Mode, alpha from
// Kubernetes 1.37), which k8s.io/api v1.33 does not have yet. It is
// accepted with upstream's spelling, values and meaning, so manifests
// written for newer kubelets work: TLS connects over TLS without verifying
// the certificate; Plaintext, or no mode, does not use TLS.
const (
	GRPCModePlaintext = "Plaintext"
	GRPCModeTLS       = "TLS"
)

var grpcModes = []string{GRPCModePlaintext, GRPCModeTLS}

// checkGRPCMode validates grpc.mode (nil: absent) and reports whether the
// probe uses TLS. It is only ever set inside grpc, where decoding put it.
func checkGRPCMode(p *v1.Probe, mode *string, path *field.Path) (bool, field.ErrorList) {
	if mode == nil || p.GRPC == nil {
		return false, nil
	}
	switch *mode {
	case GRPCModePlaintext:
		return false, nil
	case GRPCModeTLS:
		return true, nil
	}
	return false, field.ErrorList{field.NotSupported(path.Child("grpc", "mode"), *mode, grpcModes)}
}
