//go:build runtime

package runtimetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/probed-dev/probed/internal/probetext"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// outcome is what a probe (probed's, or the kubelet's reference) came to.
type outcome struct {
	res    results.Result
	out    string
	err    error
	events []string
}

func (o outcome) String() string {
	short := func(s string) string {
		if len(s) > 200 {
			return fmt.Sprintf("%s...(%d bytes)", s[:200], len(s))
		}
		return s
	}
	ev := make([]string, len(o.events))
	for i, e := range o.events {
		ev[i] = short(e)
	}
	return fmt.Sprintf("%s %q err=%v events=%q", o.res, short(o.out), o.err, ev)
}

// hostileSink keeps events as "Type Reason Message".
type hostileSink struct {
	mu     sync.Mutex
	events []string
}

func (s *hostileSink) Event(typ, reason, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, typ+" "+reason+" "+msg)
}

func (s *hostileSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// startProbe runs one readiness probe in the background, inside ns when
// it is not nil (see inNetns), and delivers its outcome.
func startProbe(p *prober.Prober, spec *v1.Probe, target prober.Target, ns *os.File) <-chan outcome {
	done := make(chan outcome, 1)
	run := func() {
		sink := &hostileSink{}
		res, out, err := p.Probe(context.Background(), probespec.Readiness, spec, target, sink)
		done <- outcome{res: res, out: out, err: err, events: sink.all()}
	}
	if ns == nil {
		go run()
		return done
	}
	go func() {
		if err := inNetns(ns, run); err != nil {
			done <- outcome{res: results.Unknown, err: err}
		}
	}()
	return done
}

// probeWithin runs one readiness probe and fails the test if it has not
// returned by bound: the hostile target must not hold it past its timeout
// (times the attempts it may take) plus a margin. The output must be
// within the kubelet's 10 KiB.
func probeWithin(t testing.TB, p *prober.Prober, spec *v1.Probe, target prober.Target, ns *os.File, bound time.Duration) outcome {
	t.Helper()
	select {
	case o := <-startProbe(p, spec, target, ns):
		if len(o.out) > prober.MaxOutputBytes {
			t.Errorf("output of %d bytes, cap %d", len(o.out), prober.MaxOutputBytes)
		}
		return o
	case <-time.After(bound):
		t.Fatalf("probe still running after %v", bound)
		return outcome{}
	}
}

// kubeletHTTP is the kubelet's httpGet probe (pkg/probe/http.DoHTTPProbe
// and its client, v1.33, with the prober's retries and event mapping), run
// against the same hostile server for reference.
func kubeletHTTP(url string, timeout time.Duration) outcome {
	tr := utilnet.SetTransportDefaults(&http.Transport{
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet
		DisableKeepAlives:  true,
		Proxy:              http.ProxyURL(nil),
		DisableCompression: true,
	})
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: timeout, Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
	do := func() (prober.Result, string, error) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return prober.Unknown, "", err
		}
		req.Header.Set("User-Agent", "kube-probe/"+prober.DefaultUserAgentVersion)
		req.Header.Set("Accept", "*/*")
		res, err := client.Do(req)
		if err != nil {
			return prober.Failure, err.Error(), nil
		}
		defer func() { _ = res.Body.Close() }()
		b, err := io.ReadAll(&io.LimitedReader{R: res.Body, N: prober.MaxOutputBytes})
		if err != nil {
			return prober.Failure, "", err
		}
		switch code := res.StatusCode; {
		case code >= 200 && code < 300:
			return prober.Success, string(b), nil
		case code >= 300 && code < 400:
			return prober.Warning, "Probe terminated redirects, Response body: " + string(b), nil
		default:
			return prober.Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", code), nil
		}
	}
	var (
		r   prober.Result
		out string
		err error
	)
	for range 3 {
		if r, out, err = do(); err == nil {
			break
		}
	}
	switch {
	case err != nil:
		return outcome{results.Failure, out, err, []string{"Warning Unhealthy Readiness probe errored and resulted in failure state: " + err.Error()}}
	case r == prober.Success:
		return outcome{res: results.Success, out: out}
	case r == prober.Warning:
		return outcome{res: results.Success, out: out, events: []string{"Warning ProbeWarning Readiness probe warning: " + out}}
	}
	return outcome{res: results.Failure, out: out, events: []string{"Warning Unhealthy Readiness probe failed: " + out}}
}

// sameOutcome compares result, output, error text and events, ignoring
// ephemeral client ports, which of net/http's timeout texts was given, and
// the response bytes probed withholds from transport errors.
func sameOutcome(got, want outcome) bool {
	n := func(s string) string { return probetext.Normalise(probetext.Withheld(s)) }
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return n(err.Error())
	}
	return got.res == want.res && n(got.out) == n(want.out) && errText(got.err) == errText(want.err) &&
		n(strings.Join(got.events, "\n")) == n(strings.Join(want.events, "\n"))
}
