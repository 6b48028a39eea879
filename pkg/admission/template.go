package admission

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// templatePath returns where a kind keeps its pod template ("spec.template"
// or "spec.jobTemplate.spec.template"), or "" for a kind without one.
func templatePath(gvk metav1.GroupVersionKind) string {
	switch {
	case gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "ReplicaSet" || gvk.Kind == "StatefulSet" || gvk.Kind == "DaemonSet"):
		return "spec.template"
	case gvk.Group == "batch" && gvk.Kind == "Job":
		return "spec.template"
	case gvk.Group == "batch" && gvk.Kind == "CronJob":
		return "spec.jobTemplate.spec.template"
	}
	return ""
}

// workload is the part of a templated workload that validation reads.
type workload struct {
	Spec struct {
		Template    *v1.PodTemplateSpec `json:"template"`
		JobTemplate *struct {
			Spec struct {
				Template *v1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

// podOf decodes the pod, or the pod template as a pod, that raw (an object
// of kind gvk) holds; nil when it holds none.
func podOf(gvk metav1.GroupVersionKind, raw []byte) (*probedObject, error) {
	if gvk.Group == "" && gvk.Kind == "Pod" {
		pod := &v1.Pod{}
		if err := json.Unmarshal(raw, pod); err != nil {
			return nil, fmt.Errorf("decoding the pod: %w", err)
		}
		return &probedObject{pod: pod}, nil
	}
	path := templatePath(gvk)
	if path == "" {
		return nil, nil
	}
	var w workload
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", gvk.Kind, err)
	}
	t := w.Spec.Template
	if gvk.Kind == "CronJob" {
		t = nil
		if w.Spec.JobTemplate != nil {
			t = w.Spec.JobTemplate.Spec.Template
		}
	}
	if t == nil {
		return nil, nil
	}
	return &probedObject{pod: &v1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}, path: path + ": "}, nil
}

func templateEqual(a, b *v1.Pod) bool {
	return equality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta) && equality.Semantic.DeepEqual(a.Spec, b.Spec)
}
