package servingcert

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

var (
	t0      = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	testCfg = Config{
		DNSNames:     []string{"probed-webhook.probed-system.svc", "probed-webhook.probed-system"},
		CAValidity:   90 * time.Hour,
		CertValidity: 30 * time.Hour,
	}
)

func mustPlan(t *testing.T, now time.Time, data map[string][]byte, cfg Config) (map[string][]byte, Change) {
	t.Helper()
	out, ch, err := plan(now, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out, ch
}

func leafOf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(data[CertKey], data[KeyKey])
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func bundleOf(t *testing.T, data map[string][]byte) []*x509.Certificate {
	t.Helper()
	cas, err := certutil.ParseCertsPEM(data[CABundleKey])
	if err != nil {
		t.Fatal(err)
	}
	return cas
}

// trusted fails unless leaf verifies, at now, for every name, against the
// bundle as the API server would use it (the caBundle).
func trusted(t *testing.T, leaf *x509.Certificate, bundle []byte, now time.Time, names []string) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("the bundle holds no certificate")
	}
	for _, n := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: roots, CurrentTime: now}); err != nil {
			t.Fatalf("serial %x at %v for %s: %v", leaf.SerialNumber, now, n, err)
		}
	}
}

func TestPlanFromNothing(t *testing.T) {
	for name, data := range map[string]map[string][]byte{
		"empty":   nil,
		"garbage": {CABundleKey: []byte("x"), CAKeyKey: []byte("y"), CertKey: []byte("z"), KeyKey: []byte("w"), "other": []byte("kept")},
	} {
		t.Run(name, func(t *testing.T) {
			out, ch := mustPlan(t, t0, data, testCfg)
			if !ch.CA || !ch.Cert {
				t.Errorf("change %+v, want both", ch)
			}
			if cas := bundleOf(t, out); len(cas) != 1 || !cas[0].IsCA {
				t.Errorf("bundle %v, want one CA", cas)
			}
			trusted(t, leafOf(t, out), out[CABundleKey], t0, testCfg.DNSNames)
			if data != nil && string(out["other"]) != "kept" {
				t.Error("a key of someone else's was dropped")
			}
			// Nothing is due: a second round changes nothing.
			again, ch := mustPlan(t, t0.Add(time.Hour), out, testCfg)
			if ch.CA || ch.Cert || !dataEqual(again, out) {
				t.Errorf("second round changed %+v", ch)
			}
		})
	}
}

func TestPlanRenewsServingCertificateAtTwoThirds(t *testing.T) {
	first, _ := mustPlan(t, t0, nil, testCfg)
	due := renewAt(leafOf(t, first))
	if want := t0.Add(20 * time.Hour); due.Sub(want).Abs() > time.Second {
		t.Fatalf("renewal due at %v, want two thirds of 30h after issue, %v", due, want)
	}
	same, ch := mustPlan(t, due.Add(-time.Second), first, testCfg)
	if ch.Cert || !dataEqual(same, first) {
		t.Fatal("renewed before it was due")
	}
	renewed, ch := mustPlan(t, due, first, testCfg)
	if ch.CA || !ch.Cert {
		t.Fatalf("change %+v, want the serving certificate alone", ch)
	}
	if string(renewed[CABundleKey]) != string(first[CABundleKey]) {
		t.Error("the bundle changed with the serving certificate: replicas would wait on propagation for nothing")
	}
	trusted(t, leafOf(t, renewed), renewed[CABundleKey], due, testCfg.DNSNames)
}

// A new CA joins the old one in the bundle; certificates of both verify
// until the old CA expires, and then it leaves.
func TestPlanRenewsCAKeepingTheOld(t *testing.T) {
	first, _ := mustPlan(t, t0, nil, testCfg)
	oldCA := bundleOf(t, first)[0]
	at := renewAt(oldCA)
	// Keep the serving certificate renewed along the way, as the rotator does.
	data := first
	for now := t0; now.Before(at); now = now.Add(time.Hour) {
		data, _ = mustPlan(t, now, data, testCfg)
	}
	oldLeaf := leafOf(t, data)
	rotated, ch := mustPlan(t, at, data, testCfg)
	if !ch.CA || !ch.Cert {
		t.Fatalf("change %+v, want a new CA and certificate", ch)
	}
	cas := bundleOf(t, rotated)
	if len(cas) != 2 || cas[1].SerialNumber.Cmp(oldCA.SerialNumber) != 0 || !cas[0].IsCA {
		t.Fatalf("bundle after rotation: %d CAs, want the new then the old", len(cas))
	}
	// A replica still serving the old certificate is trusted by the new
	// bundle, and so is one serving the new.
	trusted(t, oldLeaf, rotated[CABundleKey], at, testCfg.DNSNames)
	trusted(t, leafOf(t, rotated), rotated[CABundleKey], at, testCfg.DNSNames)
	if leafOf(t, rotated).CheckSignatureFrom(cas[0]) != nil {
		t.Error("the new serving certificate is not signed by the new CA")
	}
	// After the old CA expires, it is dropped.
	data = rotated
	for now := at; !now.After(oldCA.NotAfter); now = now.Add(time.Hour) {
		data, _ = mustPlan(t, now, data, testCfg)
	}
	if cas := bundleOf(t, data); len(cas) != 1 || cas[0].SerialNumber.Cmp(oldCA.SerialNumber) == 0 {
		t.Errorf("bundle after the old CA expired: %d CAs", len(cas))
	}
}

func TestPlanNewNamesNewCertificate(t *testing.T) {
	first, _ := mustPlan(t, t0, nil, testCfg)
	cfg := testCfg
	cfg.DNSNames = append(cfg.DNSNames, "extra.example")
	out, ch := mustPlan(t, t0, first, cfg)
	if ch.CA || !ch.Cert {
		t.Fatalf("change %+v, want a new serving certificate only", ch)
	}
	trusted(t, leafOf(t, out), out[CABundleKey], t0, cfg.DNSNames)
}

// A serving certificate never outlives its CA.
func TestPlanClampsToTheCA(t *testing.T) {
	cfg := testCfg
	cfg.CertValidity = 1000 * time.Hour
	out, _ := mustPlan(t, t0, nil, cfg)
	if leaf, ca := leafOf(t, out), bundleOf(t, out)[0]; leaf.NotAfter.After(ca.NotAfter) {
		t.Errorf("certificate until %v, CA until %v", leaf.NotAfter, ca.NotAfter)
	}
}

// A certificate signed by a CA that is not the signing one (the Secret
// edited by hand, say) is replaced.
func TestPlanReplacesForeignCertificate(t *testing.T) {
	a, _ := mustPlan(t, t0, nil, testCfg)
	b, _ := mustPlan(t, t0, nil, testCfg)
	mixed := map[string][]byte{CABundleKey: a[CABundleKey], CAKeyKey: a[CAKeyKey], CertKey: b[CertKey], KeyKey: b[KeyKey]}
	out, ch := mustPlan(t, t0, mixed, testCfg)
	if ch.CA || !ch.Cert {
		t.Fatalf("change %+v", ch)
	}
	trusted(t, leafOf(t, out), out[CABundleKey], t0, testCfg.DNSNames)
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {DNSNames: []string{"x"}}, {DNSNames: []string{"x"}, CAValidity: time.Hour}} {
		if _, _, err := plan(t0, nil, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
