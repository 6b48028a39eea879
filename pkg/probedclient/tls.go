package probedclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/pkg/servingca"
)

// TLSOptions is how the client checks probed's serving certificate. By
// default, against the CA the probed pod published (pkg/servingca), for
// the name of the pod's node: a process that took probed's port while
// probed was down cannot answer for it, and gets no token.
type TLSOptions struct {
	// CAFile verifies probed's certificate against this CA instead: for a
	// certificate of your own (probed's --tls-cert-file).
	CAFile string
	// ServerName overrides the name checked in the certificate (default:
	// the pod's node, as probed's self-signed certificate names it; with
	// CAFile, 127.0.0.1, the port-forward's end).
	ServerName string
	// InsecureSkipVerify accepts any certificate: the connection is then
	// encrypted, but to whatever answers.
	InsecureSkipVerify bool
}

// tlsConfig is how to check the certificate of pod's probed.
func tlsConfig(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, o TLSOptions) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if o.InsecureSkipVerify {
		tc.InsecureSkipVerify = true
		return tc, nil
	}
	var ca []byte
	if o.CAFile != "" {
		b, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--probed-ca-file: %w", err)
		}
		ca, tc.ServerName = b, "127.0.0.1"
	} else {
		cm, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the serving CA that probed pod %s/%s publishes (ConfigMap %s/%s, probed's --publish-serving-ca): %w%s; "+
				"with a certificate of your own pass --probed-ca-file", pod.Namespace, pod.Name, pod.Namespace, pod.Name, err, RoleHint(err))
		}
		if ca, err = servingca.CA(cm, pod); err != nil {
			return nil, err
		}
		tc.ServerName = pod.Spec.NodeName
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no PEM certificate in probed's CA")
	}
	if o.ServerName != "" {
		tc.ServerName = o.ServerName
	}
	return tc, nil
}
