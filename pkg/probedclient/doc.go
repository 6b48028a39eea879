// Package probedclient reads a node's probed endpoints (/debug/probes,
// /metrics) through the API server.
//
// It never shows a node the caller's own credentials. The caller's
// kubeconfig (a token, an exec or OIDC plugin, a client certificate) goes
// to the API server alone: to find the probed pod, to read the CA that pod
// publishes (pkg/servingca), to open a port-forward to it
// (pods/portforward), and to issue a token of probed-plugin, a service
// account bound to probed's reader roles, for the audience "probed" and ten
// minutes (TokenRequest). probed sees that token only, over TLS verified
// against the published CA for the pod's node name, and accepts no token
// the API server would accept for itself. So whatever listens on probed's
// port while probed is down gets no token at all, and a token that leaks
// anyway is good for reading probed's endpoints, for minutes.
//
// The API server's pods/proxy cannot carry the caller's identity to probed:
// its authentication filter deletes the Authorization header once it has
// authenticated the request, and it dials pods without a client
// certificate. docs/kubectl-plugin.md has the reasoning and the roles a
// user needs.
package probedclient
