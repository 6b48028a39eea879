package admission

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/probed-dev/probed/pkg/probespec"
)

// FuzzAdopterPatch: whatever pod the API server sends (any pod JSON, sent
// as the API server encodes it), the handler answers without panicking;
// when it patches, the patch applies to the object as sent and yields
// exactly what probespec.Adopt makes of the pod, and a second admission of
// the result patches nothing; when it refuses, it says what Adopt said.
func FuzzAdopterPatch(f *testing.F) {
	f.Add(mustJSON(f, webPod()))
	f.Add([]byte(`{"metadata":{"annotations":{"probed.io/probes":"{\"a\":{\"livenessProbe\":{\"tcpSocket\":{\"port\":1}}}}"}},"spec":{"containers":[{"name":"a","livenessProbe":{"exec":{"command":["x"]}},"readinessProbe":{"grpc":{"port":1}}}]}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"probed.io/probes":"a: {startupProbe: {exec: {command: [x]}}}","probed.io/adopted":"z/livenessProbe"}},"spec":{"readinessGates":[{"conditionType":"x"}],"containers":[{"name":"a"}]}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"probed.io/probes":"{"}},"spec":{"containers":[{"name":"a","startupProbe":{"exec":{}}}]}}`))
	f.Add([]byte(`{"spec":{"initContainers":[{"name":"s","restartPolicy":"Always","startupProbe":{"exec":{}}},{"name":"i","livenessProbe":{"exec":{}}}],"containers":[{"name":"a"},{"name":"b","readinessProbe":{"httpGet":{"port":"x"}}}]}}`))
	a := &Adopter{Scope: Scope{ExcludedNamespaces: []string{"kube-system"}, OwnNames: DefaultOwnNames()}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var pod v1.Pod
		if err := json.Unmarshal(data, &pod); err != nil {
			return
		}
		// The API server sends its own encoding of the object.
		raw := mustJSON(t, &pod)
		resp := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", raw, nil))

		want := pod.DeepCopy()
		adoption, err := probespec.Adopt(&want.ObjectMeta, &want.Spec)
		switch {
		case a.Scope.skip("apps", &pod.ObjectMeta) != "":
			if !resp.Allowed || len(resp.Patches) > 0 {
				t.Fatalf("out of scope, yet allowed=%v with %d patches", resp.Allowed, len(resp.Patches))
			}
			return
		case err != nil:
			if resp.Allowed || resp.Result.Message != err.Error() {
				t.Fatalf("Adopt failed with %q; the response: allowed=%v %q", err, resp.Allowed, resp.Result.Message)
			}
			return
		case !resp.Allowed:
			t.Fatalf("refused a pod Adopt takes: %v", resp.Result)
		case !adoption.Changed() && len(resp.Patches) > 0:
			t.Fatalf("patched a pod Adopt leaves alone: %s", mustJSON(t, resp.Patches))
		}
		patched := applyPatch(t, raw, resp)
		var got v1.Pod
		if err := json.Unmarshal(patched, &got); err != nil {
			t.Fatalf("the patched pod does not decode: %v\n%s", err, patched)
		}
		if !equality.Semantic.DeepEqual(&got, want) {
			t.Fatalf("the patch made\n%s\nAdopt made\n%s", mustJSON(t, &got), mustJSON(t, want))
		}
		again := a.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", patched, nil))
		if !again.Allowed || len(again.Patches) > 0 {
			t.Fatalf("a second admission: allowed=%v patches %s", again.Allowed, mustJSON(t, again.Patches))
		}
	})
}
