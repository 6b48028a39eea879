//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Pods that a Deployment (through its ReplicaSet), StatefulSet, DaemonSet
// and Job create are adopted like bare pods. No controller manager runs in
// this tier, so each pod is created from its workload's template as that
// controller creates it: its name or generateName, its owner reference to
// the real object, the labels, and what the controller adds to the spec
// (a StatefulSet's hostname, a DaemonSet's node affinity and tolerations, a
// Job's restart policy and tracking finalizer). The webhook must move the
// template's probes into the annotation as they were written, keep the
// user's own entry, add the gate once, record the move, and leave
// everything the controller set as it was.
func TestWebhookAdoptsControllerPods(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port)
	w.waitReady()
	ctx := context.Background()
	ns := labelledNamespace(t, "wh-controllers", true)

	tmpl := func(app string) v1.PodTemplateSpec {
		p := probedPod("")
		p.Labels = map[string]string{"app": app}
		return v1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	owner := func(kind, apiVersion string, m metav1.Object) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: m.GetName(), UID: m.GetUID(),
			Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}
	}

	// Deployment → ReplicaSet → pod. The user's own readiness entry for
	// "app" must win over the spec's.
	depT := tmpl("web")
	depT.Annotations = map[string]string{probespec.ProbesAnnotation: `{"app": {"readinessProbe": {"httpGet": {"path": "/mine", "port": "http"}}}}`}
	dep, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Selector: sel("web"), Template: depT},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsT := *dep.Spec.Template.DeepCopy()
	rsT.Labels["pod-template-hash"] = "6c8d9f"
	rs, err := client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-6c8d9f", Labels: rsT.Labels, OwnerReferences: owner("Deployment", "apps/v1", dep)},
		Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsT.Labels}, Template: rsT},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsPod := podFromTemplate(rs.Spec.Template, owner("ReplicaSet", "apps/v1", rs))
	rsPod.GenerateName = rs.Name + "-"

	// StatefulSet: a stable name, hostname and subdomain, per-pod labels.
	sts, err := client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Selector: sel("db"), Template: tmpl("db"), ServiceName: "db"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stsPod := podFromTemplate(sts.Spec.Template, owner("StatefulSet", "apps/v1", sts))
	stsPod.Name = "db-0"
	stsPod.Labels["controller-revision-hash"] = "db-5b7f6c"
	stsPod.Labels["statefulset.kubernetes.io/pod-name"] = "db-0"
	stsPod.Labels["apps.kubernetes.io/pod-index"] = "0"
	stsPod.Spec.Hostname, stsPod.Spec.Subdomain = "db-0", "db"

	// DaemonSet: pinned to its node by affinity, with the tolerations the
	// controller adds.
	ds, err := client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: sel("agent"), Template: tmpl("agent")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dsPod := podFromTemplate(ds.Spec.Template, owner("DaemonSet", "apps/v1", ds))
	dsPod.GenerateName = "agent-"
	dsPod.Labels["controller-revision-hash"] = "7d4b9c"
	dsPod.Labels["pod-template-generation"] = "1"
	dsPod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}}}}
	for _, key := range []v1.TaintEffect{v1.TaintEffectNoExecute, v1.TaintEffectNoSchedule} {
		dsPod.Spec.Tolerations = append(dsPod.Spec.Tolerations, v1.Toleration{Key: "node.kubernetes.io/unschedulable", Operator: v1.TolerationOpExists, Effect: key})
	}

	// Job: restartPolicy Never, the job's labels, the tracking finalizer.
	jobT := tmpl("batch")
	jobT.Spec.RestartPolicy = v1.RestartPolicyNever
	job, err := client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec:       batchv1.JobSpec{Template: jobT, ManualSelector: ptrTo(true), Selector: sel("batch")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobPod := podFromTemplate(job.Spec.Template, owner("Job", "batch/v1", job))
	jobPod.GenerateName = "batch-"
	jobPod.Labels["batch.kubernetes.io/job-name"] = "batch"
	jobPod.Labels["batch.kubernetes.io/controller-uid"] = string(job.UID)
	jobPod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}

	for _, tc := range []struct {
		kind string
		pod  *v1.Pod
		// userReadiness: the template's own annotation entry for app's
		// readiness probe, which must win.
		userReadiness bool
	}{
		{"Deployment", rsPod, true},
		{"StatefulSet", stsPod, false},
		{"DaemonSet", dsPod, false},
		{"Job", jobPod, false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			sent := tc.pod.DeepCopy()
			got, err := client.CoreV1().Pods(ns).Create(ctx, tc.pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = client.CoreV1().Pods(ns).Delete(ctx, got.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
			})
			if why := adopted(got); why != "" {
				t.Fatalf("%s's pod not adopted: %s\n%s", tc.kind, why, mustJSON(got))
			}
			checkMovedAsWritten(t, sent, got, tc.userReadiness)
			// Every spec probe taken out of the spec, the one the user's
			// entry overrode included.
			wantMoved := "app/livenessProbe,app/readinessProbe,app/startupProbe,proxy/livenessProbe"
			if a := got.Annotations[probespec.AdoptedAnnotation]; a != wantMoved {
				t.Errorf("%s = %q, want %q", probespec.AdoptedAnnotation, a, wantMoved)
			}
			gates := 0
			for _, g := range got.Spec.ReadinessGates {
				if g.ConditionType == probespec.ReadinessGate {
					gates++
				}
			}
			if gates != 1 {
				t.Errorf("%d probed.io/ready gates, want 1", gates)
			}
			// What the controller set is as it was.
			if !equality.Semantic.DeepEqual(got.OwnerReferences, sent.OwnerReferences) {
				t.Errorf("ownerReferences %v, want %v", got.OwnerReferences, sent.OwnerReferences)
			}
			if !equality.Semantic.DeepEqual(got.Labels, sent.Labels) {
				t.Errorf("labels %v, want %v", got.Labels, sent.Labels)
			}
			if !slices.Equal(got.Finalizers, sent.Finalizers) || got.Spec.Hostname != sent.Spec.Hostname ||
				got.Spec.Subdomain != sent.Spec.Subdomain || got.Spec.RestartPolicy != sent.Spec.RestartPolicy ||
				!equality.Semantic.DeepEqual(got.Spec.Affinity, sent.Spec.Affinity) {
				t.Errorf("the controller's fields changed:\nsent %s\ngot  %s", mustJSON(sent), mustJSON(got))
			}
			for _, tol := range sent.Spec.Tolerations {
				if !slices.ContainsFunc(got.Spec.Tolerations, func(g v1.Toleration) bool { return g.MatchToleration(&tol) }) {
					t.Errorf("toleration %v lost", tol)
				}
			}
			for i, c := range got.Spec.Containers {
				if c.Name != sent.Spec.Containers[i].Name || c.Image != sent.Spec.Containers[i].Image ||
					!equality.Semantic.DeepEqual(c.Ports, sent.Spec.Containers[i].Ports) {
					t.Errorf("container %d changed beyond its probes: %s", i, mustJSON(c))
				}
			}
		})
	}
}

// podFromTemplate is a pod as a workload controller makes it from its
// template: the template's metadata and spec, and the owner reference.
func podFromTemplate(t v1.PodTemplateSpec, owners []metav1.OwnerReference) *v1.Pod {
	t = *t.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: t.Labels, Annotations: t.Annotations, OwnerReferences: owners},
		Spec:       t.Spec,
	}
}

// checkMovedAsWritten checks that each spec probe sent is in got's
// annotation as it was written (the API server's defaults included: it
// defaults before mutating webhooks run), except app's readiness probe when
// the user's own entry must win.
func checkMovedAsWritten(t *testing.T, sent, got *v1.Pod, userReadiness bool) {
	t.Helper()
	var entries map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(got.Annotations[probespec.ProbesAnnotation]), &entries); err != nil {
		t.Fatalf("the annotation: %v", err)
	}
	for _, c := range append(append([]v1.Container{}, sent.Spec.InitContainers...), sent.Spec.Containers...) {
		for field, p := range map[string]*v1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
			if p == nil {
				continue
			}
			raw, ok := entries[c.Name][field]
			if !ok {
				t.Errorf("%s/%s not in the annotation", c.Name, field)
				continue
			}
			var moved v1.Probe
			if err := json.Unmarshal(raw, &moved); err != nil {
				t.Errorf("%s/%s: %v", c.Name, field, err)
				continue
			}
			if c.Name == "app" && field == "readinessProbe" && userReadiness {
				if moved.HTTPGet == nil || moved.HTTPGet.Path != "/mine" {
					t.Errorf("the user's readiness entry lost: %s", raw)
				}
				continue
			}
			// The sent probe, defaulted as the API server defaults it.
			want := p.DeepCopy()
			defaultProbe(want)
			if !equality.Semantic.DeepEqual(&moved, want) {
				t.Errorf("%s/%s moved as %s, want %s", c.Name, field, raw, mustJSON(want))
			}
		}
	}
	if n := strings.Count(got.Annotations[probespec.ProbesAnnotation], `"app"`); n != 1 {
		t.Errorf("the annotation names app %d times", n)
	}
}

// defaultProbe applies the API server's defaults for a probe (pkg/apis/core/v1).
func defaultProbe(p *v1.Probe) {
	for f, d := range map[*int32]int32{&p.TimeoutSeconds: 1, &p.PeriodSeconds: 10, &p.SuccessThreshold: 1, &p.FailureThreshold: 3} {
		if *f == 0 {
			*f = d
		}
	}
	if h := p.HTTPGet; h != nil {
		if h.Path == "" {
			h.Path = "/"
		}
		if h.Scheme == "" {
			h.Scheme = v1.URISchemeHTTP
		}
	}
	if g := p.GRPC; g != nil && g.Service == nil {
		g.Service = ptrTo("")
	}
}
