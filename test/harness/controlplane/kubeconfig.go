package controlplane

import (
	"encoding/json"
	"os"

	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

const contextName = "probed-test"

// adminConfig is the admin's rest.Config (O=system:masters). The limits are
// raised because client-go's default 5 QPS throttles test setup loops.
func adminConfig(host string, p *pki) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.caPEM,
			CertData: p.adminCertPEM,
			KeyData:  p.adminKeyPEM,
		},
		QPS:   200,
		Burst: 400,
	}
}

// WriteKubeconfig writes cfg as a self-contained kubeconfig (certificates or
// token embedded), for kubectl or probed's --kubeconfig. To run probed as its
// service account: WriteKubeconfig(path, cp.ConfigForToken(token)).
//
// The file is JSON, which is valid YAML. It is built from the v1 types
// directly because client-go's clientcmd package would pull spf13/pflag into
// the daemon's go.mod.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdv1.Config{
		Kind:       "Config",
		APIVersion: "v1",
		Clusters: []clientcmdv1.NamedCluster{{Name: contextName, Cluster: clientcmdv1.Cluster{
			Server:                   cfg.Host,
			CertificateAuthorityData: cfg.CAData,
		}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: contextName, AuthInfo: clientcmdv1.AuthInfo{
			ClientCertificateData: cfg.CertData,
			ClientKeyData:         cfg.KeyData,
			Token:                 cfg.BearerToken,
		}}},
		Contexts: []clientcmdv1.NamedContext{{Name: contextName, Context: clientcmdv1.Context{
			Cluster: contextName, AuthInfo: contextName,
		}}},
		CurrentContext: contextName,
	}
	b, err := json.MarshalIndent(kc, "", "  ")
	if err != nil {
		return err
	}
	// 0600: it holds a private key or a token.
	return os.WriteFile(path, append(b, '\n'), 0o600)
}
