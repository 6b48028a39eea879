package probetext

import "testing"

func TestWithheld(t *testing.T) {
	for in, want := range map[string]string{
		`Get "http://a/\"x\"": net/http: malformed HTTP response "garbage"`: `Get "http://a/\"x\"": net/http: malformed HTTP response "<withheld>"`,
		`Readiness probe failed: Get "http://a/": bad "1" and "2"`:          `Readiness probe failed: Get "http://a/": bad "<withheld>" and "<withheld>"`,
		`dial tcp 10.0.0.1:80: connect: connection refused`:                 `dial tcp 10.0.0.1:80: connect: connection refused`,
		`service unhealthy (responded with "NOT_SERVING")`:                  `service unhealthy (responded with "NOT_SERVING")`,
	} {
		if got := Withheld(in); got != want {
			t.Errorf("Withheld(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		`read tcp 127.0.0.1:40000->127.0.0.1:80: reset`:                                       `read tcp 127.0.0.1:X->127.0.0.1:80: reset`,
		`Get "u": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`: `Get "u": <timeout>`,
		`Get "u": http2: frame too large`:                                                     `Get "u": <not HTTP/2>`,
	} {
		if got := Normalise(in); got != want {
			t.Errorf("Normalise(%q) = %q; want %q", in, got, want)
		}
	}
}
