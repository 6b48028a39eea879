package probedclient

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// ErrNoToken: the caller's kubeconfig has no bearer token to show probed.
var ErrNoToken = errors.New("probed authenticates callers by bearer token (a TokenReview), and your kubeconfig user has none " +
	"(a client certificate, which probed cannot check, or nothing): pass one with --token, " +
	"e.g. --token=$(kubectl create token <service-account> -n <namespace>) for a service account bound to probed's reader roles")

// TLSOptions is how the client checks probed's serving certificate.
type TLSOptions struct {
	// CAFile verifies probed's certificate against this CA. Without it the
	// certificate is not verified: probed serves a self-signed one unless
	// given --tls-cert-file (see docs/kubectl-plugin.md for what that
	// leaves open).
	CAFile string
	// ServerName overrides the name checked in the certificate (the
	// connection goes to 127.0.0.1, the port-forward's local end).
	ServerName string
}

// callerTransport sends the caller's own credentials (its bearer token, from
// the kubeconfig, --token or an exec plugin) to probed, over TLS checked as
// o says. Nothing else of the API server's configuration applies: its CA,
// client certificate and proxy are for the API server.
func callerTransport(cfg *rest.Config, o TLSOptions) (http.RoundTripper, error) {
	if cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0 {
		return nil, errors.New("probed does not support impersonation (--as, --as-group, --as-uid): it authorizes the token's own user")
	}
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		return nil, ErrNoToken
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, fmt.Errorf("credentials from the kubeconfig: %w", err)
	}
	tc.TLS = transport.TLSConfig{CAFile: o.CAFile, ServerName: o.ServerName, Insecure: o.CAFile == ""}
	tc.Proxy = nil
	tc.Username, tc.Password = "", ""
	rt, err := transport.New(tc)
	if err != nil {
		return nil, fmt.Errorf("transport to probed: %w", err)
	}
	return rt, nil
}
