//go:build integration

package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestBodyCheckReadsOnlyThePod (issue 20, item 4): a body check's pass or
// fail is published in the pod's conditions, so it would be an oracle for
// any body the node can fetch. Aimed at another host it is refused as an
// InvalidProbe naming the field, whatever
// --probe-host-policy allows (kubelet here: everything). On the pod's own
// IP it runs.
//
// No worker runs the refused check, so the other host gets no request.
func TestBodyCheckReadsOnlyThePod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	podIP, otherIP := loopbackIP(), loopbackIP()
	secret := startAnswerTarget(t, otherIP, http.StatusOK, "token=s3cr3t")
	own := startAnswerTarget(t, podIP, http.StatusOK, "ok")

	elsewhere := map[string]any{"httpGet": map[string]any{"host": otherIP, "port": secret.Port, "path": "/"},
		"periodSeconds": 1, "probed.io/expectBody": "^token=s"}
	pod := e.createPod("oracle", mustJSON(probes{"app": {"readinessProbe": elsewhere}}), true, container{name: "app"})
	e.runPod(pod, podIP, time.Minute)
	ownPod := e.createPod("own", mustJSON(probes{"app": {"readinessProbe": httpProbe(own.Port, "/", map[string]any{"probed.io/expectBody": "^ok$"})}}),
		true, container{name: "app"})
	e.runPod(ownPod, podIP, time.Minute)
	p := e.startProbed("--probe-host-policy=kubelet")

	e.waitCond("own", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	e.waitCond("oracle", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	if c := condition(e.pod("oracle"), "ready.probed.io/app"); c.Reason != "InvalidProbe" ||
		!strings.Contains(c.Message, `probed.io/expectBody: Forbidden: a body check may read only the pod's own answers`) {
		t.Errorf("condition = %+v; want InvalidProbe naming probed.io/expectBody", c)
	}
	eventually(t, "InvalidProbe event naming the field", 20*time.Second, func() bool {
		return e.findEvent(pod.UID, "InvalidProbe", `readinessProbe: probed.io/expectBody: Forbidden`) != nil
	})
	for _, w := range p.debugProbes() {
		if w.PodName == "oracle" {
			t.Errorf("a worker runs the refused body check: %+v", w)
		}
	}
}
