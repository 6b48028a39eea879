package main

import (
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/pkg/probedclient"
)

// probedOptions is how a command reaches probed pods: one token of the
// plugin's service account, issued through client when first needed and
// shared by the command's sessions, and probed's certificate checked as
// the flags say.
func (o *options) probedOptions(client kubernetes.Interface) probedclient.Options {
	t := o.token
	t.Namespace = o.probedNS
	return probedclient.Options{Tokens: probedclient.NewTokens(client, t, o.clock), TLS: o.tls}
}
