package probespec

import (
	"fmt"
	"net"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TLSField is the probe field, beside core/v1 Probe's own, that makes an
// HTTPS or gRPC-over-TLS probe verify who answers and present a client
// certificate (docs/tls.md). Without it a probe's TLS is the kubelet's:
// no verification, no client certificate.
const TLSField = "probed.io/tls"

// The roots a verifying probe trusts when it names no CA file.
const (
	// RootsSystem: the roots of probed's image (the default, as for any
	// TLS client: curl, grpc_health_probe without -tls-ca-cert).
	RootsSystem = "System"
	// RootsCluster: the cluster's CA, which every namespace's
	// kube-root-ca.crt holds; probed trusts it for the API server.
	RootsCluster = "Cluster"
)

// Default file names: those of a cert-manager Certificate's Secret.
const (
	DefaultCAPath   = "ca.crt"
	DefaultCertPath = "tls.crt"
	DefaultKeyPath  = "tls.key"
)

// maxVolumePathBytes bounds a path inside a volume; the API allows the
// same for a volume item's path.
const maxVolumePathBytes = 4096

// VolumeKind is the kind of pod volume a certificate file is read from.
type VolumeKind string

const (
	VolumeSecret    VolumeKind = "secret"
	VolumeConfigMap VolumeKind = "configMap"
	VolumeProjected VolumeKind = "projected"
)

// VolumeFile is one file in one of the pod's own volumes.
type VolumeFile struct {
	Volume string
	Kind   VolumeKind
	// Path is relative to the volume's root, clean and descending.
	Path string
}

// TLS is a probe's verified-TLS settings, validated. Exactly one of CA,
// Roots and InsecureSkipVerify says what the server is verified against.
type TLS struct {
	// ServerName is verified against the server's certificate and sent as
	// SNI; empty: the address probed dials.
	ServerName string
	// CA is the bundle to verify against; nil: Roots.
	CA *VolumeFile
	// Roots is RootsSystem or RootsCluster when CA is nil and the server
	// is verified.
	Roots string
	// ClientCert and ClientKey are presented to a server that asks; both
	// nil or both set.
	ClientCert, ClientKey *VolumeFile
	// InsecureSkipVerify presents the client certificate without verifying
	// the server.
	InsecureSkipVerify bool
}

// Equal reports whether t and o ask for the same TLS.
func (t *TLS) Equal(o *TLS) bool {
	if t == nil || o == nil {
		return t == o
	}
	same := func(a, b *VolumeFile) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
	return t.ServerName == o.ServerName && t.Roots == o.Roots && t.InsecureSkipVerify == o.InsecureSkipVerify &&
		same(t.CA, o.CA) && same(t.ClientCert, o.ClientCert) && same(t.ClientKey, o.ClientKey)
}

// tlsField is TLSField as the annotation spells it.
type tlsField struct {
	ServerName         string           `json:"serverName,omitempty"`
	CA                 *volumeFileField `json:"ca,omitempty"`
	Roots              string           `json:"roots,omitempty"`
	ClientCertificate  *clientCertField `json:"clientCertificate,omitempty"`
	InsecureSkipVerify bool             `json:"insecureSkipVerify,omitempty"`
}

type volumeFileField struct {
	Volume string `json:"volume"`
	Path   string `json:"path,omitempty"`
}

type clientCertField struct {
	Volume   string `json:"volume"`
	CertPath string `json:"certPath,omitempty"`
	KeyPath  string `json:"keyPath,omitempty"`
}

// checkTLS validates a probe's TLSField (nil: absent) against the probe and
// the pod's volumes, and returns it compiled; nil when absent.
func checkTLS(p *v1.Probe, f *tlsField, volumes []v1.Volume, fp *field.Path) (*TLS, field.ErrorList) {
	if f == nil {
		return nil, nil
	}
	fp = fp.Child(TLSField)
	var errs field.ErrorList
	switch {
	case p.HTTPGet != nil:
		if p.HTTPGet.Scheme != v1.URISchemeHTTPS {
			errs = append(errs, field.Invalid(fp, "", "needs httpGet.scheme HTTPS"))
		}
	case p.GRPC != nil:
		if m := p.GRPC.Mode; m != nil && *m != v1.GRPCProbeModeTLS {
			errs = append(errs, field.Invalid(fp, "", fmt.Sprintf("needs grpc.mode TLS or no grpc.mode, not %s", *m)))
		}
	default:
		errs = append(errs, field.Invalid(fp, "", "only httpGet probes with scheme HTTPS and grpc probes use TLS"))
	}
	t := &TLS{ServerName: f.ServerName, Roots: f.Roots, InsecureSkipVerify: f.InsecureSkipVerify}
	if n := f.ServerName; n != "" && net.ParseIP(n) == nil {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(fp.Child("serverName"), n, msg))
		}
	}
	switch f.Roots {
	case "", RootsSystem, RootsCluster:
	default:
		errs = append(errs, field.NotSupported(fp.Child("roots"), f.Roots, []string{RootsSystem, RootsCluster}))
	}
	if f.CA != nil {
		var e field.ErrorList
		t.CA, e = volumeFile(f.CA.Volume, f.CA.Path, DefaultCAPath, volumes, fp.Child("ca"), "path")
		errs = append(errs, e...)
		if f.Roots != "" {
			errs = append(errs, field.Invalid(fp.Child("roots"), f.Roots, "may not be set with ca"))
		}
	}
	if c := f.ClientCertificate; c != nil {
		var e1, e2 field.ErrorList
		t.ClientCert, e1 = volumeFile(c.Volume, c.CertPath, DefaultCertPath, volumes, fp.Child("clientCertificate"), "certPath")
		t.ClientKey, e2 = volumeFile(c.Volume, c.KeyPath, DefaultKeyPath, volumes, fp.Child("clientCertificate"), "keyPath")
		errs = append(append(errs, e1...), e2...)
	}
	if f.InsecureSkipVerify {
		if f.CA != nil || f.Roots != "" {
			errs = append(errs, field.Invalid(fp.Child("insecureSkipVerify"), true, "may not be set with ca or roots: it verifies nothing"))
		}
		if f.ClientCertificate == nil {
			errs = append(errs, field.Invalid(fp.Child("insecureSkipVerify"), true,
				"without a clientCertificate it is the kubelet's TLS; leave "+TLSField+" out"))
		}
	} else if t.CA == nil && t.Roots == "" {
		t.Roots = RootsSystem
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// volumeFile resolves a file of one of the pod's secret, configMap or
// projected volumes.
func volumeFile(volume, p, def string, volumes []v1.Volume, fp *field.Path, pathField string) (*VolumeFile, field.ErrorList) {
	var errs field.ErrorList
	vf := &VolumeFile{Volume: volume, Path: p}
	if vf.Path == "" {
		vf.Path = def
	}
	if volume == "" {
		errs = append(errs, field.Required(fp.Child("volume"), "names one of the pod's secret, configMap or projected volumes"))
	} else {
		var found *v1.Volume
		for i := range volumes {
			if volumes[i].Name == volume {
				found = &volumes[i]
				break
			}
		}
		switch {
		case found == nil:
			errs = append(errs, field.NotFound(fp.Child("volume"), volume))
		case found.Secret != nil:
			vf.Kind = VolumeSecret
		case found.ConfigMap != nil:
			vf.Kind = VolumeConfigMap
		case found.Projected != nil:
			vf.Kind = VolumeProjected
		default:
			errs = append(errs, field.Invalid(fp.Child("volume"), volume, "must be a secret, configMap or projected volume"))
		}
	}
	if msg := checkDescendingPath(vf.Path); msg != "" {
		errs = append(errs, field.Invalid(fp.Child(pathField), vf.Path, msg))
	}
	return vf, errs
}

// checkDescendingPath returns why p is not a clean relative path that
// stays inside a volume, or "". Elements starting with ".." are the
// kubelet's own (its atomic writer's ..data).
func checkDescendingPath(p string) string {
	switch {
	case len(p) > maxVolumePathBytes:
		return fmt.Sprintf("must have at most %d bytes", maxVolumePathBytes)
	case strings.HasPrefix(p, "/"):
		return "must be relative to the volume"
	case path.Clean(p) != p:
		return "must be a clean path (no empty, . or trailing elements)"
	}
	for _, e := range strings.Split(p, "/") {
		if strings.HasPrefix(e, "..") {
			return "may not have an element starting with '..'"
		}
	}
	return ""
}
