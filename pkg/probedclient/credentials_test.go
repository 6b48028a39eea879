package probedclient

import (
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestCallerTransportSendsOnlyTheToken(t *testing.T) {
	var got http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	cfg := &rest.Config{Host: "https://apiserver.invalid", BearerToken: "caller-token", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not for probed")}}
	rt, err := callerTransport(cfg, TLSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL + "/debug/probes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a := got.Get("Authorization"); a != "Bearer caller-token" {
		t.Errorf("Authorization = %q, want the caller's token", a)
	}
}

func TestCallerTransportVerifiesWithCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	// A CA that did not sign the server's certificate: refused.
	rt, err := callerTransport(&rest.Config{BearerToken: "t"}, TLSOptions{CAFile: "testdata/other-ca.crt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&http.Client{Transport: rt}).Get(srv.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a certificate from an unknown CA was accepted (err %v)", err)
	}
	// The CA that did: accepted.
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if rt, err = callerTransport(&rest.Config{BearerToken: "t"}, TLSOptions{CAFile: ca}); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL)
	if err != nil {
		t.Fatalf("probed's own CA refused: %v", err)
	}
	resp.Body.Close()
}

func TestCallerTransportRefuses(t *testing.T) {
	if _, err := callerTransport(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("x"), KeyData: []byte("y")}}, TLSOptions{}); !errors.Is(err, ErrNoToken) {
		t.Errorf("a client-certificate user: err = %v, want ErrNoToken", err)
	}
	cfg := &rest.Config{BearerToken: "t", Impersonate: rest.ImpersonationConfig{UserName: "someone"}}
	if _, err := callerTransport(cfg, TLSOptions{}); err == nil || !strings.Contains(err.Error(), "impersonation") {
		t.Errorf("impersonation: err = %v, want it refused", err)
	}
}

func TestAccessErrorNamesRole(t *testing.T) {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:serviceaccount:a:b\" cannot get path \"/debug/probes\"","reason":"Forbidden","code":403}`
	err := error(&AccessError{Path: "/debug/probes", Pod: "probed-system/probed-x", Status: 403, Body: body})
	msg := err.Error()
	for _, want := range []string{"403 Forbidden", `User "system:serviceaccount:a:b" cannot get path "/debug/probes"`, "ClusterRole probed-debug-reader", "--clusterrole=probed-debug-reader"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if !IsForbidden(err) {
		t.Error("IsForbidden = false")
	}
	if m := (&AccessError{Path: "/metrics", Status: 403}).Error(); !strings.Contains(m, "probed-metrics-reader") {
		t.Errorf("/metrics: %s", m)
	}
}
