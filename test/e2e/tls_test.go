//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// tlsServerName is the only name in the test's server certificates: no IP
// address, so that a probe verifies only when it asks for this name.
const tlsServerName = "probe-target.tls.test"

// tlsRotationTimeout bounds how long a Secret update may take to reach
// the server and probed: the kubelet rewrites a secret volume at the pod's
// next sync, every syncFrequency (10s on the harness's node), after its
// watch has the new Secret.
const tlsRotationTimeout = 90 * time.Second

// tlsProbe is a probe of probed.io/probes with the probed.io/tls field.
type tlsProbe struct {
	v1.Probe `json:",inline"`
	TLS      *probeTLS `json:"probed.io/tls,omitempty"`
}

// probeTLS is the probed.io/tls field.
type probeTLS struct {
	ServerName        string         `json:"serverName,omitempty"`
	CA                *tlsVolumeFile `json:"ca,omitempty"`
	ClientCertificate *tlsClientCert `json:"clientCertificate,omitempty"`
}

type tlsVolumeFile struct {
	Volume string `json:"volume"`
	Path   string `json:"path,omitempty"`
}

type tlsClientCert struct {
	Volume   string `json:"volume"`
	CertPath string `json:"certPath,omitempty"`
	KeyPath  string `json:"keyPath,omitempty"`
}

// tlsMaterial is one CA's Secret: ca.crt, the server's tls.crt and tls.key
// (for tlsServerName, as probe-target's --tls-dir reads them), and a
// client certificate, client.crt and client.key, whose CN is clientCN.
type tlsMaterial struct {
	data     map[string][]byte
	clientCN string
}

// newTLSMaterial makes a CA named name, and the server and client
// certificates it issues.
func newTLSMaterial(t *testing.T, name string) tlsMaterial {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "probed e2e CA " + name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, dnsNames []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames,
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
	}
	m := tlsMaterial{data: map[string][]byte{"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})},
		clientCN: "probed-client-" + name}
	m.data["tls.crt"], m.data["tls.key"] = issue(2, "probe-target-"+name, []string{tlsServerName}, x509.ExtKeyUsageServerAuth)
	m.data["client.crt"], m.data["client.key"] = issue(3, m.clientCN, nil, x509.ExtKeyUsageClientAuth)
	return m
}

// TestVerifiedTLS runs probes with probed.io/tls against probe-target
// serving TLS from a Secret's files and requiring a client certificate
// (--tls-require-client-cert): an HTTPS readiness probe and a gRPC liveness
// probe, each verifying the server's certificate for its name against the
// Secret's ca.crt and presenting the Secret's client certificate, all read
// by probed from the pod's volume on the node (deploy/probe-tls, which
// TestMain deploys). The pod becomes Ready through probed. Then the Secret
// is rotated to another CA's server and client certificates: once the
// kubelet has updated the volume, the server accepts only the new CA's
// clients, and probed presents the new client certificate (the server logs
// its CN) and verifies the server against the new CA; the pod is Ready,
// and neither it nor probed was restarted. A second container's liveness
// probe, to the same server, asks for another name and fails with Go's
// x509 message (its failure threshold is out of the test's reach: it is
// never restarted, and the pod's readiness does not depend on it).
func TestVerifiedTLS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const secret, volume = "tls-e2e", "tls"
	const httpsPort, grpcPort = 8443, 9443
	one, two := newTLSMaterial(t, "one"), newTLSMaterial(t, "two")

	_, err := client.CoreV1().Secrets(testNS).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: testNS}, Data: one.data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.CoreV1().Secrets(testNS).Delete(context.Background(), secret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting Secret %s: %v", secret, err)
		}
	})

	verified := func(serverName string) *probeTLS {
		return &probeTLS{ServerName: serverName, CA: &tlsVolumeFile{Volume: volume},
			ClientCertificate: &tlsClientCert{Volume: volume, CertPath: "client.crt", KeyPath: "client.key"}}
	}
	annotation, err := json.Marshal(map[string]map[string]tlsProbe{
		"app": {
			"readinessProbe": {Probe: v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(httpsPort), Scheme: v1.URISchemeHTTPS}}, PeriodSeconds: 2},
				TLS: verified(tlsServerName)},
			"livenessProbe": {Probe: v1.Probe{ProbeHandler: grpcHandler(grpcPort), PeriodSeconds: 2, FailureThreshold: 3},
				TLS: verified(tlsServerName)},
		},
		// The same server (the pod's network is shared), another name.
		"wrongname": {
			"livenessProbe": {Probe: v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromInt32(httpsPort), Scheme: v1.URISchemeHTTPS}}, PeriodSeconds: 2, FailureThreshold: 10000},
				TLS: verified("wrong.tls.test")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	s := newSC(t, "tls-verified", regular)
	s.group = "tls"
	pod := s.newPod("app", target([]int32{httpsPort, grpcPort}, "--http=", fmt.Sprintf("--https=:%d", httpsPort),
		fmt.Sprintf("--grpc=:%d", grpcPort), "--grpc-tls", "--tls-dir=/tls", "--tls-require-client-cert"), probes{})
	pod.Annotations["probed.io/probes"] = string(annotation)
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
	pod.Spec.Volumes = []v1.Volume{{Name: volume, VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: volume, MountPath: "/tls", ReadOnly: true}}
	// Serves nothing: it only carries the probe that must fail.
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
		Name: "wrongname", Image: imgTarget, ImagePullPolicy: v1.PullNever, Args: []string{"--http="}})

	probedBefore := probedPodState(ctx, t)
	s.create(pod)
	s.waitContainerStarted()
	s.poll("Ready through probed", 500*time.Millisecond, podStartTimeout, func(p *v1.Pod) (bool, error) {
		return condStatus(p, s.readyCond()) == v1.ConditionTrue && isReady(p), nil
	})
	s.note("Ready %v after creation", s.elapsed())
	// Ready says the HTTPS readiness probe passed; the gRPC liveness probe
	// runs on its own clock.
	s.waitHandshakes("app", one.clientCN, eventTimeout)

	// The wrong name fails as Go's verification says it, in the kubelet's
	// event shape.
	nameErr := fmt.Sprintf("x509: certificate is valid for %s, not wrong.tls.test", tlsServerName)
	wrong := s.tlsEvent("wrongname", "Liveness probe failed: ", nameErr)
	s.note("the wrong name's failure: %q", wrong.Message)
	s.mu.Lock()
	s.seen = append(s.seen, wrong) // finish checks kubectl describe shows it
	s.mu.Unlock()

	// Rotation: every file of the Secret at once, to CA two's.
	cur, err := client.CoreV1().Secrets(testNS).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Data = two.data
	if _, err := client.CoreV1().Secrets(testNS).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	var notReady []string
	logs := s.waitHandshakes("app", two.clientCN, tlsRotationTimeout, func() {
		if p := s.get(); !isReady(p) {
			notReady = append(notReady, fmt.Sprintf("%v: %s", time.Since(rotated).Round(time.Second), summarize(p)))
		}
	})
	took := time.Since(rotated)
	s.note("rotated to CA two in %v (the server's first handshakes with %s on both ports)", took.Round(100*time.Millisecond), two.clientCN)
	if !strings.Contains(logs, `serving certificate "probe-target-two"`) {
		t.Errorf("the server never logged taking CA two's certificate:\n%s", logs)
	}
	if len(notReady) > 0 {
		s.note("not Ready at %d of the samples during the rotation: %s", len(notReady), strings.Join(notReady, "; "))
	}
	p := s.poll("Ready after the rotation", 500*time.Millisecond, 30*time.Second, func(p *v1.Pod) (bool, error) {
		return isReady(p), nil
	})
	for _, c := range []string{"app", "wrongname"} {
		if cs := containerStatus(p, c); cs == nil || cs.RestartCount != 0 {
			t.Errorf("container %s: status %+v, want never restarted", c, cs)
		}
	}
	if after := probedPodState(ctx, t); after != probedBefore {
		t.Errorf("probed's pod was %s before and %s after: restarted or replaced", probedBefore, after)
	}
}

// containerLog reads the named container's log through the API server.
func (s *sc) containerLog(container string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	b, err := client.CoreV1().Pods(s.ns).GetLogs(s.podName, &v1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		s.t.Fatalf("log of %s/%s: %v", s.podName, container, err)
	}
	return string(b)
}

// waitHandshakes waits until the server in container has logged a
// handshake with the client certificate cn on both its HTTPS and its gRPC
// listener, calling each (if any) at every poll; it returns the log.
func (s *sc) waitHandshakes(container, cn string, timeout time.Duration, each ...func()) string {
	s.t.Helper()
	began := time.Now()
	var logs string
	err := wait.PollUntilContextTimeout(s.ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		for _, f := range each {
			f()
		}
		logs = s.containerLog(container)
		return strings.Contains(logs, fmt.Sprintf("HTTPS: accepted client certificate CN=%q", cn)) &&
			strings.Contains(logs, fmt.Sprintf("gRPC: accepted client certificate CN=%q", cn)), nil
	})
	if err != nil {
		s.t.Fatalf("%v: in %v, the server has not logged a handshake with %s on both HTTPS and gRPC: %v; its log:\n%s",
			s.elapsed(), time.Since(began).Round(time.Second), cn, err, logs)
	}
	return logs
}

// tlsEvent waits for probed's Unhealthy Warning about container whose
// message starts with prefix and contains msg.
func (s *sc) tlsEvent(container, prefix, msg string) v1.Event {
	s.t.Helper()
	var found v1.Event
	err := wait.PollUntilContextTimeout(s.ctx, 500*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		for _, e := range s.probedEvents() {
			if e.Reason == "Unhealthy" && e.Type == warning && e.InvolvedObject.FieldPath == "spec.containers{"+container+"}" &&
				strings.HasPrefix(e.Message, prefix) && strings.Contains(e.Message, msg) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		s.t.Fatalf("%v: no Unhealthy event about %s with %q from probed; events: %s", s.elapsed(), container, msg, formatEvents(s.events()))
	}
	return found
}

// probedPodState names probed's pod on the node and its restart count.
func probedPodState(ctx context.Context, t *testing.T) string {
	t.Helper()
	name, err := nd.ProbedPodName(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(nd.ProbedNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var restarts int32
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
	}
	return fmt.Sprintf("%s (uid %s, %d restarts)", p.Name, p.UID, restarts)
}
