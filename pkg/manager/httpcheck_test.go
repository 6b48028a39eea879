package manager

import (
	"testing"

	"github.com/probed-dev/probed/pkg/probespec"
)

// TestWorkersGetHTTPCheck: "probed.io/expectStatus" and "expectBody" reach
// the prober's Target, and an edit of either alone replaces the worker.
func TestWorkersGetHTTPCheck(t *testing.T) {
	tp := &targetProber{}
	e := newEnvWith(t, func(o *Options) { o.Prober = tp })
	probe := func(body string) map[string]any {
		return map[string]any{"httpGet": map[string]any{"port": 1, "path": "/"}, "periodSeconds": 1,
			probespec.ExpectStatusField: []int{204}, probespec.ExpectBodyField: body}
	}
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": probe("^ok$")}}), "app")
	e.create(pod)
	lastCheck := func() *probespec.HTTPCheck {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		if len(tp.targets) == 0 {
			return nil
		}
		return tp.targets[len(tp.targets)-1].HTTPCheck
	}
	e.eventually("a probe with the checks", func() bool {
		c := lastCheck()
		return c != nil && len(c.Status) == 1 && c.Status[0] == 204 && c.Body != nil && c.Body.String() == "^ok$"
	})
	k := probeKey{"app", probespec.Readiness}
	before := e.worker("u1", k)

	edited := pod.DeepCopy()
	edited.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": probe("^OK$")}})
	edited.ResourceVersion = "2"
	e.update(edited)
	e.eventually("the edited check", func() bool {
		c := lastCheck()
		return c != nil && c.Body != nil && c.Body.String() == "^OK$"
	})
	if e.worker("u1", k) == before {
		t.Error("an edit of probed.io/expectBody kept the old worker")
	}
}
