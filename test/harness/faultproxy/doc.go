// Package faultproxy is a TLS reverse proxy on loopback in front of a
// kube-apiserver that injects API faults on demand: it cuts open watch
// streams (so informers re-watch or relist) and answers a share of requests,
// or all of them for a while, with 429 (with Retry-After) or 5xx.
//
// Clients authenticate with a bearer token, which the proxy passes through
// unchanged; it trusts the apiserver's CA upstream and serves its own
// certificate (CAPEM) downstream. Watch streams are forwarded event by event
// and flushed at once, so a cut always falls between two events.
package faultproxy
