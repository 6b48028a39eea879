package main

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// `probed approved-reach` prints what the webhook would write: the
// approval of the pod's probes as they are, from YAML or JSON.
func TestApprovedReachSubcommand(t *testing.T) {
	probes := `{"app": {"livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}}}}`
	want, err := probespec.ApproveReach(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{probespec.ProbesAnnotation: probes}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
	})
	if err != nil || !strings.HasPrefix(want, "v1,app/livenessProbe=") {
		t.Fatalf("ApproveReach: %q, %v", want, err)
	}
	for name, in := range map[string]string{
		"yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    probed.io/probes: '" + probes + "'\nspec:\n  containers:\n  - name: app\n    image: x\nstatus:\n  phase: Running\n",
		"json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "annotations": {"probed.io/probes": ` + strings.ReplaceAll(`"`+strings.ReplaceAll(probes, `"`, `\"`)+`"`, "\n", "") + `}}, "spec": {"containers": [{"name": "app"}]}}`,
	} {
		var out, errs bytes.Buffer
		if code := runSubcommand("approved-reach", nil, strings.NewReader(in), &out, &errs); code != 0 || out.String() != want+"\n" {
			t.Errorf("%s: exit %d, out %q, err %q; want %q", name, code, out.String(), errs.String(), want)
		}
	}
	for name, in := range map[string]string{
		"malformed probes": "kind: Pod\nmetadata:\n  annotations:\n    probed.io/probes: '{'\nspec:\n  containers:\n  - name: app\n",
		"not a pod":        "kind: Deployment\n",
	} {
		var out, errs bytes.Buffer
		if code := runSubcommand("approved-reach", nil, strings.NewReader(in), &out, &errs); code != 1 || out.Len() > 0 {
			t.Errorf("%s: exit %d, out %q, err %q; want exit 1 and nothing printed", name, code, out.String(), errs.String())
		}
	}
}
