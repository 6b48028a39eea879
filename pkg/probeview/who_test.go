package probeview

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fixture builds a pod of namespace shop on node from its containers, the
// probed.io/probes annotation (none when "") and whether it has the gate.
func fixture(name, node, annotation string, gated bool, containers ...v1.Container) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec:       v1.PodSpec{NodeName: node, Containers: containers},
	}
	if annotation != "" {
		p.Annotations = map[string]string{"probed.io/probes": annotation}
	}
	if gated {
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "other.example.com/x"}, {ConditionType: "probed.io/ready"}}
	}
	return p
}

var tcp = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}

// withSidecar adds a restartable init container.
func withSidecar(p *v1.Pod, name string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []v1.Container{{Name: name, RestartPolicy: &always}}
	return p
}

func withConditions(p *v1.Pod, conds ...v1.PodCondition) *v1.Pod {
	p.Status.Conditions = conds
	return p
}

func probedPod(name, node string, ready bool, created time.Time, args ...string) v1.Pod {
	p := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "probed-system", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "probed", Args: append([]string{"-v=2"}, args...)}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: st}}
	return p
}

func TestViewPod(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	probed := ProbedByNode([]v1.Pod{
		probedPod("probed-a", "node-a", true, t0),
		probedPod("probed-c", "node-c", false, t0),
		probedPod("probed-d", "node-d", true, t0, "--probe-source=spec", "--dry-run"),
	})
	readiness := `{"app": {"readinessProbe": {"tcpSocket": {"port": 8080}}}}`
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want PodView
	}{
		{"adopted: probed runs the annotation's, the kubelet the spec's",
			withConditions(fixture("web-1", "node-a", readiness, true, v1.Container{Name: "app", LivenessProbe: tcp}),
				v1.PodCondition{Type: "ready.probed.io/app", Status: v1.ConditionTrue, Reason: "ProbeSucceeded"},
				v1.PodCondition{Type: "probed.io/ready", Status: v1.ConditionTrue, Reason: "AllProbesSucceeded"},
				v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}),
			PodView{Node: "node-a", Gated: true, Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-a", Ready: true},
				Probes:     []ProbeRunner{{"app", "Liveness", RunByKubelet}, {"app", "Readiness", RunByProbed}},
				Conditions: []Condition{{"ready.probed.io/app", "True", "ProbeSucceeded"}, {"probed.io/ready", "True", "AllProbesSucceeded"}}}},
		{"the kubelet's only, no probed on the node",
			fixture("web-2", "node-b", "", false, v1.Container{Name: "app", ReadinessProbe: tcp, StartupProbe: tcp}),
			PodView{Node: "node-b", Probes: []ProbeRunner{{"app", "Startup", RunByKubelet}, {"app", "Readiness", RunByKubelet}}}},
		{"gated on a node with no probed",
			fixture("web-3", "node-b", readiness, true, v1.Container{Name: "app"}),
			PodView{Node: "node-b", Gated: true, Probes: []ProbeRunner{{"app", "Readiness", RunByProbed}},
				Notes: []string{"no probed on node: gate unanswered"}}},
		{"gated, probed not ready",
			fixture("web-4", "node-c", readiness, true, v1.Container{Name: "app"}),
			PodView{Node: "node-c", Gated: true, Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-c"},
				Probes: []ProbeRunner{{"app", "Readiness", RunByProbed}}, Notes: []string{"probed on node not ready: gate unanswered"}}},
		{"gated, probed in dry-run",
			fixture("web-5", "node-d", readiness, true, v1.Container{Name: "app"}),
			PodView{Node: "node-d", Gated: true, Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-d", Ready: true, DryRun: true},
				Probes: []ProbeRunner{{"app", "Readiness", RunByProbed}}, Notes: []string{"probed on node runs --dry-run: gate unanswered"}}},
		{"both declare the readiness probe; a sidecar's first",
			withSidecar(fixture("web-6", "node-a", `{"app": {"readinessProbe": {"tcpSocket": {"port": 8080}}}, "proxy": {"livenessProbe": {"tcpSocket": {"port": 15000}}}}`, true,
				v1.Container{Name: "app", ReadinessProbe: tcp}), "proxy"),
			PodView{Node: "node-a", Gated: true, Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-a", Ready: true},
				Probes: []ProbeRunner{{"proxy", "Liveness", RunByProbed}, {"app", "Readiness", RunByBoth}},
				Notes:  []string{"probed and the kubelet both run readiness of app"}}},
		{"gated with nothing for probed; an ungated probed readiness probe",
			fixture("web-7", "node-a", "", true, v1.Container{Name: "app"}),
			PodView{Node: "node-a", Gated: true, Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-a", Ready: true},
				Probes: []ProbeRunner{}, Notes: []string{"gated, but no probe for probed: never Ready"}}},
		{"no gate for probed's readiness probe",
			fixture("web-8", "node-a", readiness, false, v1.Container{Name: "app"}),
			PodView{Node: "node-a", Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-a", Ready: true},
				Probes: []ProbeRunner{{"app", "Readiness", RunByProbed}}, Notes: []string{"no probed.io/ready gate: probed's readiness does not count"}}},
		{"invalid annotation probes: refused alone, the spec's kept",
			fixture("web-9", "node-a", `{"app": {"readinessProbe": {"tcpSocket": {"port": 0}}, "livenessProbe": {"exec": {}}}}`, true,
				v1.Container{Name: "app", LivenessProbe: tcp}),
			PodView{Node: "node-a", Gated: true, Probed: &ProbedPod{Namespace: "probed-system", Name: "probed-a", Ready: true},
				Probes: []ProbeRunner{{"app", "Liveness", RunByKubelet}, {"app", "Readiness", RunByNobody}},
				Notes:  []string{"gated, but no probe for probed: never Ready", "probed.io/probes: 2 problem(s), see the pod's InvalidProbe events"}}},
		{"not scheduled",
			fixture("web-10", "", readiness, true, v1.Container{Name: "app"}),
			PodView{Gated: true, Probes: []ProbeRunner{{"app", "Readiness", RunByProbed}}, Notes: []string{"not scheduled"}}},
		{"annotation probes, no gate, no probed",
			fixture("web-11", "node-b", `{"app": {"livenessProbe": {"tcpSocket": {"port": 8080}}}}`, false, v1.Container{Name: "app"}),
			PodView{Node: "node-b", Probes: []ProbeRunner{{"app", "Liveness", RunByProbed}}, Notes: []string{"no probed on node: probed.io/probes not run"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Namespace, tc.want.Name = "shop", tc.pod.Name
			if got := ViewPod(tc.pod, probed); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ViewPod:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The probed pod that serves a node is one that writes conditions, if any.
func TestProbedByNode(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	deleting := probedPod("deleting", "n3", true, t0.Add(time.Hour))
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	failed := probedPod("failed", "n4", false, t0)
	failed.Status.Phase = v1.PodFailed
	got := ProbedByNode([]v1.Pod{
		probedPod("shadow", "n1", true, t0.Add(time.Hour), "--dry-run=true"),
		probedPod("real", "n1", true, t0),
		probedPod("old", "n2", false, t0),
		probedPod("new", "n2", true, t0.Add(time.Minute)),
		probedPod("older", "n3", false, t0),
		deleting,
		failed,
		probedPod("undone", "n5", true, t0, "--dry-run", "--dry-run=false"),
	})
	want := map[string]string{"n1": "real", "n2": "new", "n3": "older", "n5": "undone"}
	if len(got) != len(want) {
		t.Errorf("nodes %v, want %v", got, want)
	}
	for node, name := range want {
		if got[node] == nil || got[node].Name != name {
			t.Errorf("node %s: %+v, want %s", node, got[node], name)
		}
	}
	if got["n5"].DryRun || !got["n5"].Ready {
		t.Errorf("--dry-run then --dry-run=false: %+v", got["n5"])
	}
}

func TestWhoTable(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	probed := ProbedByNode([]v1.Pod{probedPod("probed-a", "node-a", true, t0), probedPod("probed-c", "node-c", false, t0)})
	readiness := `{"app": {"readinessProbe": {"tcpSocket": {"port": 8080}}}}`
	views := []PodView{
		ViewPod(fixture("web-b", "node-b", readiness, true, v1.Container{Name: "app"}), probed),
		ViewPod(withConditions(fixture("web-a", "node-a", readiness, true, v1.Container{Name: "app", LivenessProbe: tcp}),
			v1.PodCondition{Type: "probed.io/ready", Status: v1.ConditionFalse, Reason: "ContainersNotReady"}), probed),
		ViewPod(fixture("db-0", "node-c", `{"db": {"startupProbe": {"tcpSocket": {"port": 5432}}}}`, true, v1.Container{Name: "db", LivenessProbe: tcp}), probed),
		ViewPod(fixture("batch", "", "", false, v1.Container{Name: "job"}), probed),
	}
	var b bytes.Buffer
	if err := Who(&b, views, WhoOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `POD    NODE    PROBES                                 GATE  PROBED ON NODE        PROBED.IO/READY             NOTE
batch  -       none                                   no    -                     -                           not scheduled
db-0   node-c  db:startup=probed,liveness=kubelet     yes   probed-c (not ready)  -                           probed on node not ready: gate unanswered
web-a  node-a  app:liveness=kubelet,readiness=probed  yes   probed-a              False (ContainersNotReady)  -
web-b  node-b  app:readiness=probed                   yes   none                  -                           no probed on node: gate unanswered
`
	if got := b.String(); got != want {
		t.Errorf("Who:\n%s\nwant:\n%s", got, want)
	}
	b.Reset()
	if err := Who(&b, views[:1], WhoOptions{Namespaces: true}); err != nil {
		t.Fatal(err)
	}
	if want := "NAMESPACE  POD    NODE    PROBES                GATE  PROBED ON NODE  PROBED.IO/READY  NOTE\n" +
		"shop       web-b  node-b  app:readiness=probed  yes   none            -                no probed on node: gate unanswered\n"; b.String() != want {
		t.Errorf("Who with namespaces:\n%s\nwant:\n%s", b.String(), want)
	}
	if got, want := UnansweredWarning(views), "2 pod(s) wait on the probed.io/ready gate on nodes where no ready probed runs: node-b (1), node-c (1). "+
		"Nothing updates their readiness there: a Ready pod stays Ready, a new one never becomes Ready (alert ProbedGatedPodsWithoutProbed)"; got != want {
		t.Errorf("UnansweredWarning:\n%s\nwant:\n%s", got, want)
	}
	if got := UnansweredWarning(views[1:2]); got != "" {
		t.Errorf("UnansweredWarning of an answered pod: %q", got)
	}
}

// A pod's fields come from its author: the table shows no control characters.
func TestWhoEscapes(t *testing.T) {
	v := PodView{Namespace: "shop", Name: "p", Node: "n\x1b[2J", Probes: []ProbeRunner{}}
	var b bytes.Buffer
	if err := Who(&b, []PodView{v}, WhoOptions{}); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsRune(b.Bytes(), 0x1b) {
		t.Errorf("control character in %q", b.String())
	}
}
