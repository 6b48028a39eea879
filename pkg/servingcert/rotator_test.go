package servingcert

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	ns         = "probed-system"
	secretName = "probed-webhook-certs"
	configName = "probed-webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a fake API with the empty Secret and the two configurations
// deploy/ ships.
func cluster() *fake.Clientset {
	hook := func(name string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "probed-webhook"}}
	}
	return fake.NewClientset(
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: configName},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.probed.io", ClientConfig: hook("a")}, {Name: "b.probed.io", ClientConfig: hook("b")}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: configName},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "c.probed.io", ClientConfig: hook("c")}}},
	)
}

func newRotator(t *testing.T, c *fake.Clientset, clk *clocktesting.FakeClock, reg prometheus.Registerer) *Rotator {
	t.Helper()
	r, err := New(Options{
		Client: c, Clock: clk, Namespace: ns, SecretName: secretName,
		MutatingWebhookConfiguration: configName, ValidatingWebhookConfiguration: configName,
		Config: testCfg, Interval: time.Minute, Propagation: 10 * time.Second, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func syncOnce(t *testing.T, r *Rotator) time.Duration {
	t.Helper()
	wait, err := r.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return wait
}

func secretData(t *testing.T, c *fake.Clientset) map[string][]byte {
	t.Helper()
	s, err := c.CoreV1().Secrets(ns).Get(context.Background(), secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// bundles are the caBundles of every webhook of both configurations.
func bundles(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	m, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range m.Webhooks {
		out = append(out, string(w.ClientConfig.CABundle))
	}
	for _, w := range v.Webhooks {
		out = append(out, string(w.ClientConfig.CABundle))
	}
	return out
}

func served(t *testing.T, r *Rotator) *x509.Certificate {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

func TestRotatorBootstraps(t *testing.T) {
	c := cluster()
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewRegistry()
	r := newRotator(t, c, clk, reg)
	if _, err := r.GetCertificate(nil); err == nil {
		t.Error("a certificate before the first sync")
	}
	if r.Ready(context.Background()) == nil {
		t.Error("ready before the first sync")
	}
	if wait := syncOnce(t, r); wait != 0 {
		t.Errorf("the first certificate waited %v: nothing was served before it", wait)
	}
	data := secretData(t, c)
	for _, b := range bundles(t, c) {
		if b != string(data[CABundleKey]) {
			t.Fatalf("a webhook's caBundle is not the Secret's:\n%s", b)
		}
	}
	trusted(t, served(t, r), data[CABundleKey], t0, testCfg.DNSNames)
	if err := r.Ready(context.Background()); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(r.expiry.WithLabelValues("serving")); got != float64(served(t, r).NotAfter.Unix()) {
		t.Errorf("serving expiry gauge %v", got)
	}
	// A quiet round writes nothing.
	before := len(c.Actions())
	syncOnce(t, r)
	for _, a := range c.Actions()[before:] {
		if a.GetVerb() != "get" {
			t.Errorf("a quiet round did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// A renewed CA is not served until the configurations have trusted it for
// Propagation; meanwhile the old certificate keeps being served, and stays
// trusted.
func TestRotatorWaitsForTheBundleToPropagate(t *testing.T) {
	c2 := cluster()
	clk2 := clocktesting.NewFakeClock(t0)
	r2 := newRotator(t, c2, clk2, nil)
	syncOnce(t, r2)
	ca2 := bundleOf(t, secretData(t, c2))[0]
	clk2.SetTime(renewAt(ca2).Add(-time.Minute))
	for syncOnce(t, r2) > 0 {
		clk2.Step(time.Second)
	}
	before := served(t, r2)
	clk2.SetTime(renewAt(ca2))
	wait := syncOnce(t, r2)
	if wait != 10*time.Second {
		t.Fatalf("wait %v after renewing the CA, want the propagation time", wait)
	}
	if served(t, r2).SerialNumber.Cmp(before.SerialNumber) != 0 {
		t.Fatal("the new certificate was served before its CA propagated")
	}
	data2 := secretData(t, c2)
	for _, b := range bundles(t, c2) {
		if b != string(data2[CABundleKey]) {
			t.Fatal("the bundle was not patched in")
		}
	}
	trusted(t, before, data2[CABundleKey], clk2.Now(), testCfg.DNSNames)
	clk2.Step(9 * time.Second)
	if w := syncOnce(t, r2); w != time.Second {
		t.Errorf("wait %v one second before propagation, want 1s", w)
	}
	clk2.Step(time.Second)
	if w := syncOnce(t, r2); w != 0 {
		t.Errorf("still waiting %v after propagation", w)
	}
	now := served(t, r2)
	if now.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatal("the new certificate is not served after propagation")
	}
	trusted(t, now, data2[CABundleKey], clk2.Now(), testCfg.DNSNames)
}

// Two replicas renewing at once: one write wins; the other's fails on the
// resourceVersion, and its next round adopts the winner's certificates.
func TestRotatorLosesARaceGracefully(t *testing.T) {
	c := cluster()
	clk := clocktesting.NewFakeClock(t0)
	a, b := newRotator(t, c, clk, nil), newRotator(t, c, clk, nil)
	// b reads the empty Secret, and a writes before b does: b's update
	// carries a stale resourceVersion and the API server refuses it (the
	// fake checks no resourceVersion: a reactor says so for it).
	raced := false
	c.PrependReactor("update", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if !raced {
			raced = true
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, secretName, nil)
		}
		return false, nil, nil
	})
	if _, err := b.Sync(context.Background()); !apierrors.IsConflict(errorsUnwrap(err)) {
		t.Fatalf("replica b's racing write: %v, want a conflict", err)
	}
	if _, err := b.GetCertificate(nil); err == nil {
		t.Fatal("the loser serves the certificate it failed to write")
	}
	syncOnce(t, a)
	syncOnce(t, b)
	if served(t, a).SerialNumber.Cmp(served(t, b).SerialNumber) != 0 {
		t.Error("the replicas serve different certificates")
	}
	if n := len(bundleOf(t, secretData(t, c))); n != 1 {
		t.Errorf("%d CAs: the loser's CA got in", n)
	}
}

func errorsUnwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestRotatorWithoutSecret(t *testing.T) {
	c := fake.NewClientset()
	r := newRotator(t, c, clocktesting.NewFakeClock(t0), nil)
	if _, err := r.Sync(context.Background()); err == nil {
		t.Fatal("no error without the Secret")
	}
	if r.Ready(context.Background()) == nil {
		t.Error("ready without a certificate")
	}
}

// Run stops with its context, and retries an error sooner than Interval.
func TestRotatorRun(t *testing.T) {
	c := cluster()
	if err := c.CoreV1().Secrets(ns).Delete(context.Background(), secretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	r := newRotator(t, c, clk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	// The first round fails; the retry comes after the 1s backoff.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for r.Ready(ctx) != nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.Ready(ctx); err != nil {
		t.Errorf("not ready one backoff after the Secret appeared: %v", err)
	}
	cancel()
	<-done
}
