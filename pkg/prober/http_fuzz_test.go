package prober

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/probed-dev/probed/internal/probetext"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// rawServer is a loopback TCP server that answers every connection with the
// same raw bytes, whatever was asked, then closes it. It counts connections:
// one per request, as clients do not reuse a connection it closes.
type rawServer struct {
	ln    net.Listener
	port  int
	wg    sync.WaitGroup
	mu    sync.Mutex
	data  []byte
	conns atomic.Int64
}

func newRawServer(t testing.TB) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	_, s.port = hostPort(t, ln.Addr().String())
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() { _ = ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) set(data []byte) {
	s.mu.Lock()
	s.data = data
	s.mu.Unlock()
}

func (s *rawServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		data := s.data
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { _ = c.Close() }()
			// The deadline bounds a client that never finishes its request.
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			// Read the request head first: closing with it unread would
			// reset the connection and lose the response.
			r := bufio.NewReader(c)
			// A TLS ClientHello (a redirect to https) gets the bytes at
			// once rather than a wait for a request head it never sends.
			if b, err := r.Peek(1); err == nil && b[0] == 0x16 {
				_, _ = c.Write(data)
				return
			}
			for {
				line, err := r.ReadString('\n')
				if err != nil || line == "\r\n" || line == "\n" {
					break
				}
			}
			_, _ = c.Write(data)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}()
	}
}

// kubeletHTTPProbe is the kubelet's DoHTTPProbe (pkg/probe/http, v1.33) with
// its client, run for reference: probed must judge every response the same.
func kubeletHTTPProbe(client *http.Client, url string) (Result, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return Unknown, "", err
	}
	req.Header.Set("User-Agent", "kube-probe/"+DefaultUserAgentVersion)
	req.Header.Set("Accept", "*/*")
	res, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer func() { _ = res.Body.Close() }()
	lr := &io.LimitedReader{R: res.Body, N: MaxOutputBytes}
	b, err := io.ReadAll(lr)
	if err != nil {
		return Failure, "", err
	}
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return Warning, fmt.Sprintf("Probe terminated redirects, Response body: %v", string(b)), nil
		}
		return Success, string(b), nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// kubeletHTTPClient is the kubelet's probe client, except that it reads
// at most probed's MaxResponseHeaderBytes of a head (net/http's default,
// the kubelet's, is 10 MB): the one documented difference, which
// TestHTTPResponseHeadIsBounded and test/kubeletparity hold.
func kubeletHTTPClient(timeout time.Duration) *http.Client {
	t := utilnet.SetTransportDefaults(&http.Transport{
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet
		DisableKeepAlives:      true,
		Proxy:                  http.ProxyURL(nil),
		DisableCompression:     true,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	})
	return &http.Client{Timeout: timeout, Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}

// kubeletProbe is the kubelet prober's retries and mapping to a container
// result and event over kubeletHTTPProbe.
func kubeletProbe(client *http.Client, url string) (results.Result, string, []event) {
	var (
		r   Result
		out string
		err error
	)
	for range maxProbeRetries {
		if r, out, err = kubeletHTTPProbe(client, url); err == nil {
			break
		}
	}
	switch {
	case err != nil:
		return results.Failure, out, []event{{"Warning", ReasonUnhealthy, "Readiness probe errored and resulted in failure state: " + err.Error()}}
	case r == Success:
		return results.Success, out, nil
	case r == Warning:
		return results.Success, out, []event{{"Warning", ReasonProbeWarning, "Readiness probe warning: " + out}}
	case r == Failure:
		return results.Failure, out, []event{{"Warning", ReasonUnhealthy, "Readiness probe failed: " + out}}
	}
	return results.Failure, out, nil
}

// normalise is the kubelet's text as probed publishes it, less what
// differs between two probes of the same server (internal/probetext).
func normalise(s string) string { return probetext.Normalise(probetext.Withheld(s)) }

// maxQuotedOutput bounds a probe's output. Bodies are cut at MaxOutputBytes
// (plus the Warning's prefix), but error texts quote parts of the response
// as the kubelet's do (a malformed status line, a Location URL), so they can
// exceed 10 KiB and grow with the response (Go caps its head at 1 MiB).
// A quoted part may appear twice ("Get URL: parse URL: ...") with every
// byte escaped (\xNN or %NN), hence the factor.
func maxQuotedOutput(response []byte) int {
	return MaxOutputBytes + len("Probe terminated redirects, Response body: ") + 10*len(response) + 512
}

// FuzzHTTPResponse serves arbitrary bytes as the raw HTTP response (status
// line, headers, body, redirects) to an httpGet probe on loopback. The probe
// must not panic or hang beyond its timeout and retries, must keep its output
// bounded, and must reach exactly the kubelet's result, output and event for
// the same response, sending exactly the kubelet's requests (no request
// twice, redirects and retries as the kubelet's). "$A" and "$B" in the input become the ports of the
// fuzzed server and of a second one that always answers 200, so redirects
// can point at either.
func FuzzHTTPResponse(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\n\r\nbody until close",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nold",
		"HTTP/1.0 503 Service Unavailable\r\n\r\n",
		"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nsecret",
		"HTTP/1.1 399 Odd\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:$B/ok\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 301 Moved\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 307 Temporary\r\nLocation: http://127.0.0.1:$A/loop\r\n\r\n",
		"HTTP/1.1 308 Permanent\r\nLocation: //127.0.0.1:$B/\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: http://localhost:$B/elsewhere\r\nContent-Length: 5\r\n\r\nmoved",
		"HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/other-host\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: https://127.0.0.1:$A/tls\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: ::bad url\r\n\r\n",
		"HTTP/1.1 302 Found\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nbad chunk\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\ngarbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\na\nb",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
		"HTTP/1.1 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/9.9 200 OK\r\n\r\n",
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNo-Colon-Here\r\n\r\n",
		"HTTP/1.1 200 OK\r\n Folded: header\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: \x00\x01\xff\r\n\r\n",
		"HTTP/1.1 200 OK\n\nlf only",
		"",
		"\x16\x03\x01\x00\x05hello",
	} {
		f.Add([]byte(seed))
	}
	f.Add(append([]byte("HTTP/1.1 200 OK\r\n\r\n"), bytes.Repeat([]byte("x"), 3*MaxOutputBytes)...))
	f.Add(append([]byte("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:$B/\r\n\r\n"), bytes.Repeat([]byte("y"), 2*MaxOutputBytes)...))

	a, b := newRawServer(f), newRawServer(f)
	b.set([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	p := New(nil, Options{})
	ref := kubeletHTTPClient(time.Second)
	defer ref.CloseIdleConnections()
	spec := httpSpec("/fuzz", a.port)
	target := Target{PodIP: "127.0.0.1"}
	url := "http://127.0.0.1:" + strconv.Itoa(a.port) + "/fuzz"
	// A probe may take its timeout once per retry; anything longer is a hang.
	hang := maxProbeRetries*time.Duration(spec.TimeoutSeconds)*time.Second + 5*time.Second

	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.ReplaceAll(data, []byte("$A"), []byte(strconv.Itoa(a.port)))
		data = bytes.ReplaceAll(data, []byte("$B"), []byte(strconv.Itoa(b.port)))
		a.set(data)

		type outcome struct {
			res results.Result
			out string
			err error
		}
		requests := func() int64 { return a.conns.Load() + b.conns.Load() }
		before := requests()
		sink := &recordingSink{}
		done := make(chan outcome, 1)
		go func() {
			res, out, err := p.Probe(context.Background(), probespec.Readiness, spec, target, sink)
			done <- outcome{res, out, err}
		}()
		var got outcome
		select {
		case got = <-done:
		case <-time.After(hang):
			t.Fatalf("probe still running after %v for response %q", hang, data)
		}

		if got.res != results.Success && got.res != results.Failure {
			t.Fatalf("result %q", got.res)
		}
		if n := len(got.out); n > maxQuotedOutput(data) {
			t.Fatalf("output of %d bytes for a response of %d", n, len(data))
		}
		ours := requests() - before
		wantRes, wantOut, wantEvents := kubeletProbe(ref, url)
		if kubelets := requests() - before - ours; ours != kubelets {
			t.Fatalf("response %q: probed sent %d requests, the kubelet %d", data, ours, kubelets)
		}
		if got.res != wantRes || normalise(got.out) != normalise(wantOut) {
			t.Fatalf("response %q:\nprobed  %s %q (err %v)\nkubelet %s %q", data, got.res, got.out, got.err, wantRes, wantOut)
		}
		gotEvents := sink.all()
		if len(gotEvents) != len(wantEvents) {
			t.Fatalf("response %q: events %v, kubelet's %v", data, gotEvents, wantEvents)
		}
		for i := range gotEvents {
			g, w := gotEvents[i], wantEvents[i]
			g.Message, w.Message = normalise(g.Message), normalise(w.Message)
			if g != w {
				t.Fatalf("response %q: event %+v, kubelet's %+v", data, g, w)
			}
		}
	})
}
