package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// /readyz, open to anyone who reaches the node, says which check fails but
// never the error's text; /readyz?verbose says why to an authorized caller
// only.
func TestReadyzWithholdsReasons(t *testing.T) {
	secret := errors.New(`dial unix /run/containerd/containerd.sock: connect: permission denied (token "abc")`)
	h, err := Handler(Options{
		Gatherer: testRegistry(),
		Auth:     fakeAuth(&asked{}),
		Ready: []Check{
			{Name: "informer-synced", Fn: func(context.Context) error { return nil }},
			{Name: "runtime", Fn: func(context.Context) error { return secret }},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", "garbage", "nobody", "reader"} {
		code, body := getAs(t, h, "/readyz", token)
		if code != http.StatusServiceUnavailable || body != "[+] informer-synced ok\n[-] runtime failed: reason withheld\n" {
			t.Errorf("/readyz with token %q: %d %q", token, code, body)
		}
	}
	for _, tc := range []struct {
		token string
		code  int
	}{{"", 401}, {"garbage", 401}, {"nobody", 403}} {
		if code, body := getAs(t, h, "/readyz?verbose", tc.token); code != tc.code || strings.Contains(body, "containerd.sock") {
			t.Errorf("/readyz?verbose with token %q: %d %q, want %d without the reason", tc.token, code, body, tc.code)
		}
	}
	if code, body := getAs(t, h, "/readyz?verbose", "reader"); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-] runtime: "+secret.Error()) {
		t.Errorf("/readyz?verbose for an authorized caller: %d %q, want the reason", code, body)
	}
}
