package prober

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/probespec"
)

// TestHTTPErrorsWithholdResponseBytes: a transport error keeps the
// kubelet's shape but never carries what net/http quoted of the response
// (issue 20, 7.1): a header line such as "X-Internal-Api-Key: ..." must not
// reach the output, which goes into the pod's condition, nor the event.
func TestHTTPErrorsWithholdResponseBytes(t *testing.T) {
	const secret = "s3cr3t-k3y"
	const broken = "net/http: HTTP/1.x transport connection broken: "
	for _, tc := range []struct {
		name, response, want string
	}{
		{"header line with a control byte", "HTTP/1.1 200 OK\r\nX-Internal-Api-Key: " + secret + "\x01\r\n\r\n",
			broken + `malformed MIME header line: "<withheld>"`},
		{"header line without a colon", "HTTP/1.1 200 OK\r\nX-Internal-Api-Key " + secret + "\r\n\r\n",
			broken + `malformed MIME header: missing colon: "<withheld>"`},
		{"status line", "HTTP/1.1 " + secret + " OK\r\n\r\n",
			broken + `malformed HTTP status code "<withheld>"`},
		{"not HTTP", secret + "\r\n\r\n",
			broken + `malformed HTTP response "<withheld>"`},
		{"Location", "HTTP/1.1 302 Found\r\nLocation: ::" + secret + "\r\n\r\n",
			`failed to parse Location header "<withheld>": parse "<withheld>": missing protocol scheme`},
		{"Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: " + secret + "\r\n\r\n",
			broken + `bad Content-Length "<withheld>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, reply(tc.response))
			sink := &recordingSink{}
			_, out, err := New(nil, Options{}).Probe(context.Background(), probespec.Readiness, httpSpec("/hz", srv.port(t)), Target{PodIP: "127.0.0.1"}, sink)
			want := fmt.Sprintf(`Get "%s": %s`, srv.url(t, "/hz"), tc.want)
			if err != nil || out != want {
				t.Errorf("output %q, %v; want %q", out, err, want)
			}
			for _, e := range sink.all() {
				if strings.Contains(e.Message, secret) {
					t.Errorf("event %q quotes the response", e.Message)
				}
			}
			if len(sink.all()) != 1 {
				t.Errorf("events %q; want the one Unhealthy", sink.all())
			}
		})
	}
}

func TestWithholdResponseBytes(t *testing.T) {
	for in, want := range map[string]string{
		`dial tcp 10.0.0.1:80: connect: connection refused`: `dial tcp 10.0.0.1:80: connect: connection refused`,
		`unexpected EOF`:             `unexpected EOF`,
		`bad trailer key "X-Secret"`: `bad trailer key "<withheld>"`,
		`odd "quote`:                 `odd "quote`,
		`a "b" and "c\"d" then "e`:   `a "<withheld>" and "<withheld>" then "e`,
		`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug="token=abc"`: `http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug="<withheld>"`,
	} {
		if got := withholdResponseBytes(fmt.Errorf("%s", in)); got != want {
			t.Errorf("withholdResponseBytes(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestHTTPSwitchingProtocolsBodyBounded: the body of a 101 is the
// connection, which net/http never times out; a server that goes silent
// after it holds the probe for its timeout and a second, per try, not for
// ever (the kubelet's would).
func TestHTTPSwitchingProtocolsBodyBounded(t *testing.T) {
	srv := newScriptServer(t, func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\npartial"))
		_, _ = c.Read(make([]byte, 1)) // until the client closes
	})
	spec := httpSpec("/hz", srv.port(t))
	start := time.Now()
	type outcome struct {
		res Result
		out string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, out, err := New(nil, Options{}).runOnce(context.Background(), spec, Target{PodIP: "127.0.0.1"})
		done <- outcome{res, out, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe is still reading the 101's body after 10s")
	}
	res, out, err := o.res, o.out, o.err
	took := time.Since(start)
	if res != Failure || err == nil || out != "" {
		t.Errorf("probe = %v %q %v; want a body read error", res, out, err)
	}
	if took < time.Second || took > 2*time.Second+time.Second/2 {
		t.Errorf("the probe took %v; want its 1s timeout and the 1s grace", took)
	}
}
