//go:build integration

package integration

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// answerTarget is a loopback HTTP server whose status and body the test sets.
type answerTarget struct {
	Port   int
	mu     sync.Mutex
	status int
	body   string
}

func startAnswerTarget(t *testing.T, ip string, status int, body string) *answerTarget {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	tg := &answerTarget{Port: ln.Addr().(*net.TCPAddr).Port, status: status, body: body}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		tg.mu.Lock()
		status, body := tg.status, tg.body
		tg.mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tg
}

func (tg *answerTarget) Set(status int, body string) {
	tg.mu.Lock()
	tg.status, tg.body = status, body
	tg.mu.Unlock()
}

// TestHTTPResponseChecks: "probed.io/expectStatus" and "probed.io/expectBody"
// decide readiness on the real apiserver, with the check that failed in the
// condition's message and never the body of a success; a bad regexp is an
// InvalidProbe naming the field.
func TestHTTPResponseChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startAnswerTarget(t, ip, http.StatusNoContent, "")
	checked := httpProbe(app.Port, "/ready", map[string]any{
		"failureThreshold":       1,
		"probed.io/expectStatus": []int{200, 204},
		"probed.io/expectBody":   "^(ok)?$",
	})
	bad := httpProbe(app.Port, "/ready", map[string]any{"probed.io/expectBody": "(ok"})
	pod := e.createPod("checked", mustJSON(probes{"app": {"readinessProbe": checked}}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	badPod := e.createPod("badre", mustJSON(probes{"app": {"readinessProbe": bad}}), true, container{name: "app"})
	e.runPod(badPod, ip, time.Minute)
	e.startProbed()

	e.waitCond("checked", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)

	// A 200 with the wrong body: the body check fails.
	app.Set(http.StatusOK, "degraded: db down")
	e.waitCond("checked", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	c := condition(e.pod("checked"), "ready.probed.io/app")
	if c.Reason != "ProbeFailed" || !strings.Contains(c.Message, `body does not match probed.io/expectBody "^(ok)?$"`) ||
		strings.Contains(c.Message, "db down") {
		t.Errorf("condition = %+v; want ProbeFailed naming the body check, without the body", c)
	}

	app.Set(http.StatusOK, "ok")
	e.waitCond("checked", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	if c := condition(e.pod("checked"), "ready.probed.io/app"); c.Message != "probe succeeded" {
		t.Errorf("success message = %q; want the fixed text", c.Message)
	}

	// A 202 is a success for the kubelet, not for expectStatus.
	app.Set(http.StatusAccepted, "ok")
	e.waitCond("checked", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	c = condition(e.pod("checked"), "ready.probed.io/app")
	if !strings.Contains(c.Message, "statuscode: 202 (probed.io/expectStatus: [200 204])") {
		t.Errorf("condition = %+v; want the status check named", c)
	}

	// The bad regexp: not run, InvalidProbe naming the field.
	e.waitCond("badre", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	if c := condition(e.pod("badre"), "ready.probed.io/app"); c.Reason != "InvalidProbe" {
		t.Errorf("condition = %+v; want InvalidProbe", c)
	}
	eventually(t, "InvalidProbe event", 20*time.Second, func() bool {
		return e.findEvent(badPod.UID, "InvalidProbe", "probed.io/expectBody: Invalid value") != nil
	})
}
