//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/dynamic"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/test/harness/manifest"
)

// convertManifests has every kind probed convert handles, with probes of
// every handler, a sidecar, comments, and documents it must leave alone.
const convertManifests = `# every kind, as a GitOps repository would have them
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {k: v}
---
apiVersion: v1
kind: Pod
metadata:
  name: pod
  namespace: NS
spec:
  initContainers:
  - name: setup          # a plain init container: never probed
    image: busybox
  - name: proxy          # a sidecar
    image: busybox
    restartPolicy: Always
    readinessProbe:
      httpGet: {path: /ready, port: 15021}
  containers:
  - name: app
    image: busybox
    ports: [{name: http, containerPort: 8080}]
    livenessProbe:
      exec:
        command: [cat, /tmp/healthy]
    readinessProbe:
      httpGet:
        path: /ready
        port: http
        httpHeaders: [{name: X-Probe, value: "1"}]
      periodSeconds: 2
    startupProbe:
      tcpSocket: {port: http}
      failureThreshold: 30
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: deploy, namespace: NS}
spec:
  selector: {matchLabels: {app: deploy}}
  template:
    metadata: {labels: {app: deploy}}
    spec:
      containers:
      - name: app
        image: busybox
        readinessProbe:
          grpc: {port: 9090, service: health}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts, namespace: NS}
spec:
  serviceName: sts
  selector: {matchLabels: {app: sts}}
  template:
    metadata: {labels: {app: sts}}
    spec:
      containers:
      - name: db
        image: busybox
        livenessProbe: {tcpSocket: {port: 5432}, initialDelaySeconds: 5}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds, namespace: NS}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      containers:
      - name: agent
        image: busybox
        startupProbe: {exec: {command: ["true"]}, periodSeconds: 1}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: NS}
spec:
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec:
      containers:
      - name: app
        image: busybox
        readinessProbe: {httpGet: {path: /, port: 80, scheme: HTTPS}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: job, namespace: NS}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: job
        image: busybox
        livenessProbe: {exec: {command: ["true"]}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cron, namespace: NS}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: report
            image: busybox
            readinessProbe: {tcpSocket: {port: 80}}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc, namespace: NS}
spec:
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec:
      containers:
      - name: app
        image: busybox
        livenessProbe: {httpGet: {path: /healthz, port: 80}}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: tmpl, namespace: NS}
template:
  metadata: {labels: {app: tmpl}}
  spec:
    containers:
    - name: app
      image: busybox
      readinessProbe: {exec: {command: ["true"]}}
---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: listed, namespace: NS}
  spec:
    selector: {matchLabels: {app: listed}}
    template:
      metadata: {labels: {app: listed}}
      spec:
        containers:
        - name: app
          image: busybox
          startupProbe: {httpGet: {path: /started, port: 80}}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: NS}
spec:
  selector: {app: deploy}
  ports: [{port: 80}]
`

// convertResources maps the kinds above to their resources.
var convertResources = map[string]schema.GroupVersionResource{
	"ConfigMap":             {Version: "v1", Resource: "configmaps"},
	"Service":               {Version: "v1", Resource: "services"},
	"Pod":                   {Version: "v1", Resource: "pods"},
	"PodTemplate":           {Version: "v1", Resource: "podtemplates"},
	"ReplicationController": {Version: "v1", Resource: "replicationcontrollers"},
	"Deployment":            {Group: "apps", Version: "v1", Resource: "deployments"},
	"StatefulSet":           {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"DaemonSet":             {Group: "apps", Version: "v1", Resource: "daemonsets"},
	"ReplicaSet":            {Group: "apps", Version: "v1", Resource: "replicasets"},
	"Job":                   {Group: "batch", Version: "v1", Resource: "jobs"},
	"CronJob":               {Group: "batch", Version: "v1", Resource: "cronjobs"},
}

// `probed convert` (the real binary) turns manifests of every kind into
// ones the real API server accepts, by server-side apply with dry run: each
// pod template as the API server would store it has no spec probes, has the
// probed.io/ready gate when it gates, and declares in its annotation, as
// the daemon parses it, exactly the probes the API server had defaulted in
// the original spec. The documents without pod templates come out as they
// went in, and converting the output again is a no-op.
func TestConvertedManifestsApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := fmt.Sprintf("convert-%d", seq.Add(1))
	if err := cp.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	in := strings.ReplaceAll(convertManifests, "namespace: NS", "namespace: "+ns)
	out := runConvert(t, in)
	if again := runConvert(t, out); again != out {
		t.Errorf("converting the output again changed it:\n%s", again)
	}
	for _, unrelated := range []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: " + ns + "}\ndata: {k: v}\n---\n",
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: " + ns + "}\nspec:\n  selector: {app: deploy}\n  ports: [{port: 80}]\n"} {
		if !strings.Contains(out, unrelated) {
			t.Errorf("the output lacks, byte for byte:\n%s", unrelated)
		}
	}

	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	original := applyDryRun(t, dyn, in)
	converted := applyDryRun(t, dyn, out)
	if len(converted) != len(original) || len(converted) != 12 {
		t.Fatalf("%d objects applied from the output, %d from the input, want 12", len(converted), len(original))
	}
	templates := 0
	for key, obj := range converted {
		tmpl, ok := podTemplate(t, obj)
		if !ok {
			continue
		}
		templates++
		origTmpl, _ := podTemplate(t, original[key])
		pod := &v1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
		origPod := &v1.Pod{ObjectMeta: origTmpl.ObjectMeta, Spec: origTmpl.Spec}
		if left, _ := probespec.DeclaredProbes(pod, probespec.ProbeSourceSpec); len(left) > 0 {
			t.Errorf("%s: %d spec probes left", key, len(left))
		}
		want, problems := probespec.DeclaredProbes(origPod, probespec.ProbeSourceSpec)
		if len(want) == 0 || len(problems) > 0 {
			t.Fatalf("%s: the original declares %d probes, problems %v", key, len(want), problems)
		}
		got, problems := probespec.DeclaredProbes(pod, probespec.ProbeSourceAnnotation)
		if len(problems) > 0 {
			t.Errorf("%s: the daemon finds problems in the annotation: %v", key, problems)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d probes in the annotation, %d in the original spec", key, len(got), len(want))
			continue
		}
		gating := false
		for i := range want {
			if got[i].Container.Name != want[i].Container.Name || got[i].Type != want[i].Type ||
				!equality.Semantic.DeepEqual(got[i].Probe, want[i].Probe) {
				t.Errorf("%s: probe %s/%s is %+v in the annotation, %+v as the API server defaulted it in the spec",
					key, want[i].Container.Name, want[i].Type, got[i].Probe, want[i].Probe)
			}
			gating = gating || want[i].Type.String() != "Liveness"
		}
		gated := false
		for _, g := range tmpl.Spec.ReadinessGates {
			gated = gated || g.ConditionType == probespec.ReadinessGate
		}
		if gated != gating {
			t.Errorf("%s: readiness gate %v, gating probes %v", key, gated, gating)
		}
		if tmpl.Annotations[probespec.AdoptedAnnotation] == "" {
			t.Errorf("%s: no %s annotation", key, probespec.AdoptedAnnotation)
		}
		// What the webhook would make of a pod of the original: the same
		// probespec.Adopt, on the template as the API server defaulted it.
		// The spec and the record of what moved are the same; the
		// annotation declares the same probes (checked above: the
		// webhook's JSON also spells out the defaults).
		webhook := origTmpl.DeepCopy()
		if _, err := probespec.Adopt(&webhook.ObjectMeta, &webhook.Spec); err != nil {
			t.Fatalf("%s: Adopt on the original: %v", key, err)
		}
		// A Pod's service account volume is named at random on each create.
		if !equality.Semantic.DeepEqual(sameTokenVolume(tmpl.Spec), sameTokenVolume(webhook.Spec)) {
			t.Errorf("%s: the converted spec differs from what the webhook makes of the original:\n%s", key, diff.Diff(webhook.Spec, tmpl.Spec))
		}
		if a, b := tmpl.Annotations[probespec.AdoptedAnnotation], webhook.Annotations[probespec.AdoptedAnnotation]; a != b {
			t.Errorf("%s: %s is %q converted, %q from the webhook", key, probespec.AdoptedAnnotation, a, b)
		}
		fromWebhook, _ := probespec.DeclaredProbes(&v1.Pod{ObjectMeta: webhook.ObjectMeta, Spec: webhook.Spec}, probespec.ProbeSourceAnnotation)
		if len(fromWebhook) != len(got) {
			t.Errorf("%s: %d probes declared converted, %d from the webhook", key, len(got), len(fromWebhook))
		}
		for i := range min(len(got), len(fromWebhook)) {
			if !equality.Semantic.DeepEqual(got[i].Probe, fromWebhook[i].Probe) {
				t.Errorf("%s: probe %d is %+v converted, %+v from the webhook", key, i, got[i].Probe, fromWebhook[i].Probe)
			}
		}
	}
	if templates != 10 {
		t.Errorf("%d pod templates checked, want 10", templates)
	}
}

// runConvert runs `probed convert` on in and returns its output.
func runConvert(t *testing.T, in string) string {
	t.Helper()
	cmd := exec.Command(probedBin, "convert")
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probed convert: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}

// applyDryRun applies every object of a YAML stream (the items of a List
// one by one, as kubectl does) by server-side apply with dry run, and
// returns the objects as the API server would have stored them.
func applyDryRun(t *testing.T, dyn dynamic.Interface, stream string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	docs, err := manifest.Unstructured([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range docs {
		objs := []unstructured.Unstructured{*obj}
		if obj.GetKind() == "List" {
			list, err := obj.ToList()
			if err != nil {
				t.Fatal(err)
			}
			objs = list.Items
		}
		for _, o := range objs {
			gvr, ok := convertResources[o.GetKind()]
			if !ok {
				t.Fatalf("no resource for kind %s", o.GetKind())
			}
			applied, err := dyn.Resource(gvr).Namespace(o.GetNamespace()).Apply(context.Background(), o.GetName(), &o,
				metav1.ApplyOptions{FieldManager: "probed-convert-test", DryRun: []string{metav1.DryRunAll}, Force: true})
			if err != nil {
				t.Fatalf("server-side apply (dry run) of %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			out[o.GetKind()+"/"+o.GetName()] = applied
		}
	}
	return out
}

// podTemplate is the pod template of a workload (a Pod's own metadata and
// spec), as the API server returned it.
func podTemplate(t *testing.T, obj *unstructured.Unstructured) (v1.PodTemplateSpec, bool) {
	t.Helper()
	var path []string
	switch obj.GetKind() {
	case "Pod":
	case "PodTemplate":
		path = []string{"template"}
	case "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template"}
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController":
		path = []string{"spec", "template"}
	default:
		return v1.PodTemplateSpec{}, false
	}
	m := obj.Object
	if len(path) > 0 {
		var found bool
		var err error
		if m, found, err = unstructured.NestedMap(obj.Object, path...); err != nil || !found {
			t.Fatalf("%s %s: no %v: %v", obj.GetKind(), obj.GetName(), path, err)
		}
	}
	var tmpl v1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &tmpl); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return tmpl, true
}

// sameTokenVolume is spec with its service account token volume
// (kube-api-access-<random>) under one name.
func sameTokenVolume(spec v1.PodSpec) v1.PodSpec {
	spec = *spec.DeepCopy()
	const prefix = "kube-api-access-"
	for i := range spec.Volumes {
		if strings.HasPrefix(spec.Volumes[i].Name, prefix) {
			spec.Volumes[i].Name = prefix
		}
	}
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for j := range cs[i].VolumeMounts {
				if strings.HasPrefix(cs[i].VolumeMounts[j].Name, prefix) {
					cs[i].VolumeMounts[j].Name = prefix
				}
			}
		}
	}
	return spec
}
