package main

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/probed-dev/probed/pkg/endpoints"
	"github.com/probed-dev/probed/pkg/kubeclient"
)

// apiClients are probed's API clients, each with a rate limit of its own
// (as the kubelet keeps events apart): nothing a caller of the endpoints
// or an event storm does takes from the status writes' --kube-api-qps.
type apiClients struct {
	// status writes pod status, and lists and watches pods.
	status *kubeclient.Clientset
	// events records Events (--event-qps).
	events *kubeclient.Clientset
	// reviews configures the client of the endpoints' TokenReviews and
	// SubjectAccessReviews (--auth-review-qps): every made-up bearer token
	// sent to /metrics costs one, and anyone who reaches the port can send
	// them.
	reviews *rest.Config
}

func newAPIClients(cfg *rest.Config, o *options) (*apiClients, error) {
	status, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the API client: %w", err)
	}
	events, err := kubeclient.NewForConfig(eventConfig(cfg, o))
	if err != nil {
		return nil, fmt.Errorf("building the events API client: %w", err)
	}
	return &apiClients{status: status, events: events, reviews: reviewConfig(cfg, o)}, nil
}

// reviewConfig is cfg with the review client's own rate limit and a user
// agent of its own, so the API server's logs tell its requests apart.
func reviewConfig(cfg *rest.Config, o *options) *rest.Config {
	rc := rest.CopyConfig(cfg)
	rc.QPS, rc.Burst = float32(o.AuthReviewQPS), o.AuthReviewBurst
	rc.RateLimiter = nil
	rc.UserAgent = cfg.UserAgent + " (endpoint-auth)"
	return rc
}

// endpointAuth is the delegated authentication and authorization of
// /metrics and /debug/, through the review client; nil when the endpoints
// serve without it (--metrics-insecure-serving).
func endpointAuth(c *apiClients, o *options) (*endpoints.Auth, error) {
	if o.MetricsInsecure {
		return nil, nil
	}
	a, err := endpoints.DelegatedAuth(c.reviews, endpoints.AuthOptions{
		Audiences:              o.tokenAudiences(),
		MetricsAPIServerTokens: o.MetricsAPIServerTokens,
	})
	if err != nil {
		return nil, err
	}
	return &a, nil
}
