// Package probedclient reads a node's probed endpoints (/debug/probes,
// /metrics) through the API server, as the caller.
//
// The API server's pods/proxy cannot carry the caller's identity to probed:
// its authentication filter deletes the Authorization header once it has
// authenticated the request, and it dials pods without a client certificate.
// So a request proxied that way reaches probed anonymous, and probed's
// delegated authentication (TokenReview, then SubjectAccessReview for the
// path) rightly refuses it. The client therefore opens a port-forward to the
// probed pod through the API server (pods/portforward, authorized for the
// caller there) and speaks TLS to probed inside it, sending the caller's own
// bearer token: probed authenticates and authorizes the caller itself, with
// the roles of deploy/scraper-roles.yaml. docs/kubectl-plugin.md has the
// reasoning and the roles a user needs.
package probedclient
