package main

import (
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/endpoints"
	"github.com/probed-dev/probed/pkg/kubeclient"
	"github.com/probed-dev/probed/pkg/servingca"
)

// servingCert is the endpoints' certificate: --tls-cert-file's, or one made
// in memory whose CA the returned publisher (nil: none) publishes for the
// kubectl plugin.
func servingCert(o *options, client kubeclient.Interface) (endpoints.ServingCert, *servingca.Publisher, error) {
	hosts := []string{o.NodeName, "localhost", "127.0.0.1", "::1"}
	if o.MetricsInsecure || o.TLSCertFile != "" {
		return endpoints.ServingCert{CertFile: o.TLSCertFile, KeyFile: o.TLSKeyFile, Hosts: hosts}, nil, nil
	}
	ss, err := endpoints.NewSelfSigned(hosts)
	if err != nil {
		return endpoints.ServingCert{}, nil, err
	}
	cert := endpoints.ServingCert{SelfSigned: &ss}
	if !o.PublishServingCA {
		return cert, nil, nil
	}
	pod := servingca.Pod{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME"), UID: types.UID(os.Getenv("POD_UID"))}
	if err := pod.Validate(); err != nil {
		klog.InfoS("Not publishing the serving certificate's CA: kubectl probed will not verify this probed unless given --probed-ca-file", "reason", err)
		return cert, nil, nil
	}
	return cert, &servingca.Publisher{Client: client, Pod: pod, CAPEM: ss.CAPEM, Clock: clock.RealClock{}, Resync: 10 * time.Minute}, nil
}
