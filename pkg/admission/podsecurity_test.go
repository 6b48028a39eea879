package admission

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// In a namespace that enforces Pod Security baseline or restricted (the
// webhook configuration's namespaceSelector sends only those), an
// annotation probe with a host is refused as Pod Security refuses one in
// the spec; other probes, and updates that leave the annotation, pass.
func TestProbeHostRefuser(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := &ProbeHostRefuser{ExcludedNamespaces: []string{"kube-system"}, Metrics: NewMetrics(reg)}
	pod := func(annotation string) *v1.Pod {
		return &v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Annotations: map[string]string{probespec.ProbesAnnotation: annotation}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "app"}, {Name: "db", Image: "db"}}},
		}
	}
	hosted := pod(`{"app":{"readinessProbe":{"httpGet":{"host":"10.0.0.1","port":80}}},"db":{"livenessProbe":{"tcpSocket":{"host":"db.example","port":5432}}}}`)
	resp := r.Handle(t.Context(), request(admissionv1.Create, podGVK, "apps", mustJSON(t, hosted), nil))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 422 {
		t.Fatalf("a probe host was admitted: %+v", resp.Result)
	}
	for _, want := range []string{
		`probed.io/probes: container "app" readinessProbe: httpGet.host: Forbidden: the namespace enforces Pod Security baseline or restricted`,
		`container "db" livenessProbe: tcpSocket.host: Forbidden:`, `drop host "db.example"`,
	} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("message %q does not say %q", resp.Result.Message, want)
		}
	}

	for name, tc := range map[string]struct {
		op       admissionv1.Operation
		ns       string
		obj, old *v1.Pod
	}{
		"no host":            {admissionv1.Create, "apps", pod(`{"app":{"readinessProbe":{"httpGet":{"port":80}}}}`), nil},
		"an empty host":      {admissionv1.Create, "apps", pod(`{"app":{"readinessProbe":{"tcpSocket":{"host":"","port":80}}}}`), nil},
		"annotation kept":    {admissionv1.Update, "apps", hosted, hosted},
		"excluded namespace": {admissionv1.Create, "kube-system", hosted, nil},
		"no annotation":      {admissionv1.Create, "apps", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, nil},
	} {
		var old []byte
		if tc.old != nil {
			old = mustJSON(t, tc.old)
		}
		if resp := r.Handle(t.Context(), request(tc.op, podGVK, tc.ns, mustJSON(t, tc.obj), old)); !resp.Allowed {
			t.Errorf("%s: refused: %v", name, resp.Result)
		}
	}
	// An edit that adds a host is judged.
	resp = r.Handle(t.Context(), request(admissionv1.Update, podGVK, "apps", mustJSON(t, hosted), mustJSON(t, pod(`{}`))))
	if resp.Allowed {
		t.Error("an edit adding a probe host was admitted")
	}
	if got := testutil.ToFloat64(r.Metrics.requests.WithLabelValues("probe-host", OutcomeDenied)); got != 2 {
		t.Errorf("denied count %v, want 2", got)
	}
}
