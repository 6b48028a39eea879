// Package servingcert keeps the adoption webhook's serving certificate
// without manual steps: a CA and a serving certificate it generates, kept
// in a Secret that every replica shares, the CA bundle patched into the
// webhook's own Mutating- and ValidatingWebhookConfiguration, and both
// renewed before they expire.
//
// A Rotator promises:
//   - every replica serves a certificate from the Secret, and the API
//     server trusts it: a replica serves a new certificate only once the
//     webhook configurations have trusted its CA for Options.Propagation;
//   - a renewed CA joins the bundle beside the old one, which stays until
//     it expires, so a replica still serving the old certificate keeps
//     being trusted while the others move on: rotation fails no admission;
//   - replicas never fight: the Secret is written with optimistic
//     concurrency (its resourceVersion), so when two renew at once, one
//     write wins and the other replica adopts it;
//   - it needs only get and update on its one Secret, and get and patch on
//     its two webhook configurations, by name.
package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options configure a Rotator.
type Options struct {
	Client    kubernetes.Interface
	Clock     clock.WithTicker
	Namespace string
	// SecretName is the Secret that holds the certificates. It must exist
	// (deploy/ ships it empty): the Rotator does not create it.
	SecretName string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration name
	// the configurations whose every webhook gets the CA bundle; "" for
	// none.
	MutatingWebhookConfiguration, ValidatingWebhookConfiguration string
	Config                                                       Config
	// Interval is how often the Secret and the configurations are checked.
	Interval time.Duration
	// Propagation is how long a CA bundle must have been in the webhook
	// configurations before a certificate that needs it is served: the API
	// server reads the configurations through a watch.
	Propagation time.Duration
	// Registerer gets the certificates' expiry gauge; nil for none.
	Registerer prometheus.Registerer
}

// Rotator keeps the certificates (see the package comment).
type Rotator struct {
	o      Options
	served atomic.Pointer[tls.Certificate]
	ready  atomic.Bool
	expiry *prometheus.GaugeVec

	mu sync.Mutex // guards what follows: Sync runs in one goroutine, tests call it too
	// servedPEM is the certificate being served, as in the Secret.
	servedPEM []byte
	// bundle is the CA bundle last seen in every configuration, and since
	// when this process has seen it there.
	bundle      []byte
	bundleSince time.Time
}

// New checks o and returns a Rotator; Run starts it.
func New(o Options) (*Rotator, error) {
	if o.Client == nil || o.Clock == nil || o.Namespace == "" || o.SecretName == "" {
		return nil, errors.New("servingcert: client, clock, namespace and secret name are required")
	}
	if err := o.Config.validate(); err != nil {
		return nil, err
	}
	if o.Interval <= 0 {
		return nil, fmt.Errorf("servingcert: interval %v must be positive", o.Interval)
	}
	r := &Rotator{o: o}
	if o.Registerer != nil {
		r.expiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "probed_webhook_certificate_expiry_timestamp_seconds",
			Help: "When the webhook's certificates expire, in seconds since the epoch: the certificate it serves (certificate=\"serving\") and its signing CA (certificate=\"ca\").",
		}, []string{"certificate"})
		o.Registerer.MustRegister(r.expiry)
	}
	return r, nil
}

// GetCertificate serves the current certificate (tls.Config.GetCertificate).
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.served.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// Ready reports why the webhook is not ready to serve, or nil: it has a
// certificate, and the webhook configurations trust it.
func (r *Rotator) Ready(context.Context) error {
	if !r.ready.Load() {
		return errors.New("the serving certificate is not in place yet")
	}
	return nil
}

// Run syncs at once and then every Interval (sooner while a certificate
// waits for its CA bundle to propagate, or after an error) until ctx ends.
func (r *Rotator) Run(ctx context.Context) {
	backoff := time.Second
	for {
		wait, err := r.Sync(ctx)
		next := r.o.Interval
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			klog.ErrorS(err, "Keeping the webhook's certificate", "secret", klog.KRef(r.o.Namespace, r.o.SecretName))
			next = min(backoff, next)
			backoff = min(2*backoff, r.o.Interval)
		} else {
			backoff = time.Second
		}
		if wait > 0 {
			next = min(next, wait)
		}
		t := r.o.Clock.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Sync makes one round: it renews what is due in the Secret, puts the CA
// bundle into the webhook configurations, and serves the Secret's
// certificate once the bundle that trusts it has propagated. wait > 0 says
// a new certificate waits that long for propagation.
func (r *Rotator) Sync(ctx context.Context) (wait time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Clock.Now()
	secrets := r.o.Client.CoreV1().Secrets(r.o.Namespace)
	s, err := secrets.Get(ctx, r.o.SecretName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading the certificates' Secret: %w", err)
	}
	data, ch, err := plan(now, s.Data, r.o.Config)
	if err != nil {
		return 0, err
	}
	if !dataEqual(data, s.Data) {
		s.Data = data
		// The resourceVersion from the read makes this a compare-and-swap:
		// another replica's concurrent renewal makes it fail, and the next
		// round adopts what that replica wrote.
		updated, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			if apierrors.IsConflict(err) {
				klog.V(2).InfoS("Another replica renewed the certificates first; adopting theirs", "secret", klog.KObj(s))
			}
			return 0, fmt.Errorf("writing the certificates' Secret: %w", err)
		}
		s = updated
		klog.InfoS("Renewed the webhook's certificates", "secret", klog.KObj(s), "ca", ch.CA, "servingCertificate", ch.Cert)
	}

	bundle := s.Data[CABundleKey]
	if err := r.ensureBundle(ctx, bundle); err != nil {
		return 0, err
	}
	if !bytes.Equal(bundle, r.bundle) {
		r.bundle, r.bundleSince = bundle, now
	}

	certPEM := s.Data[CertKey]
	if !bytes.Equal(certPEM, r.servedPEM) {
		if r.served.Load() != nil {
			if left := r.o.Propagation - now.Sub(r.bundleSince); left > 0 {
				klog.V(2).InfoS("Waiting for the CA bundle to propagate before serving the new certificate", "wait", left)
				return left, nil
			}
		}
		pair, err := tls.X509KeyPair(certPEM, s.Data[KeyKey])
		if err != nil {
			return 0, fmt.Errorf("the Secret's serving certificate: %w", err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return 0, err
		}
		pair.Leaf = leaf
		r.served.Store(&pair)
		r.servedPEM = certPEM
		klog.InfoS("Serving a new certificate", "serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter, "dnsNames", leaf.DNSNames)
		r.setExpiry("serving", leaf.NotAfter)
		if cas, err := certutil.ParseCertsPEM(bundle); err == nil && len(cas) > 0 {
			r.setExpiry("ca", cas[0].NotAfter)
		}
	}
	r.ready.Store(true)
	return 0, nil
}

func (r *Rotator) setExpiry(which string, t time.Time) {
	if r.expiry != nil {
		r.expiry.WithLabelValues(which).Set(float64(t.Unix()))
	}
}

// ensureBundle puts bundle into every webhook of both configurations.
func (r *Rotator) ensureBundle(ctx context.Context, bundle []byte) error {
	var errs []error
	if name := r.o.MutatingWebhookConfiguration; name != "" {
		errs = append(errs, r.patchConfig(ctx, "MutatingWebhookConfiguration", name, bundle,
			func(ctx context.Context) ([]clientConfig, error) {
				c, err := r.o.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				out := make([]clientConfig, len(c.Webhooks))
				for i, w := range c.Webhooks {
					out[i] = clientConfig{w.Name, w.ClientConfig.CABundle}
				}
				return out, nil
			},
			func(ctx context.Context, patch []byte) error {
				_, err := r.o.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
				return err
			}))
	}
	if name := r.o.ValidatingWebhookConfiguration; name != "" {
		errs = append(errs, r.patchConfig(ctx, "ValidatingWebhookConfiguration", name, bundle,
			func(ctx context.Context) ([]clientConfig, error) {
				c, err := r.o.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				out := make([]clientConfig, len(c.Webhooks))
				for i, w := range c.Webhooks {
					out[i] = clientConfig{w.Name, w.ClientConfig.CABundle}
				}
				return out, nil
			},
			func(ctx context.Context, patch []byte) error {
				_, err := r.o.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
				return err
			}))
	}
	return errors.Join(errs...)
}

// clientConfig is one webhook of a configuration: its name and CA bundle.
type clientConfig struct {
	name     string
	caBundle []byte
}

func (r *Rotator) patchConfig(ctx context.Context, kind, name string, bundle []byte,
	get func(context.Context) ([]clientConfig, error), patch func(context.Context, []byte) error) error {
	hooks, err := get(ctx)
	if apierrors.IsNotFound(err) {
		// Removed to switch that half of the webhook off: nothing to trust.
		klog.V(1).InfoS("No webhook configuration to put the CA bundle into", "kind", kind, "name", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var ops []op
	for i, h := range hooks {
		if bytes.Equal(h.caBundle, bundle) {
			continue
		}
		// The test makes the patch fail, rather than land on another
		// webhook, if the list changed since it was read.
		p := fmt.Sprintf("/webhooks/%d", i)
		ops = append(ops, op{"test", p + "/name", h.name}, op{"add", p + "/clientConfig/caBundle", bundle})
	}
	if len(ops) == 0 {
		return nil
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := patch(ctx, b); err != nil {
		return fmt.Errorf("putting the CA bundle into %s %s: %w", kind, name, err)
	}
	klog.InfoS("Put the CA bundle into the webhook configuration", "kind", kind, "name", name, "webhooks", len(ops)/2)
	return nil
}
