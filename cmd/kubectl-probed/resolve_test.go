package main

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A workload's pods are those its selector matches, as kubectl finds them.
func TestPodSelector(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	for _, tc := range []struct {
		obj     runtime.Object
		want    string
		wantErr string
	}{
		{&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Selector: web}}, "app=web,tier in (a,b)", ""},
		{&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Selector: web}}, "app=web,tier in (a,b)", ""},
		{&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Selector: web}}, "app=web,tier in (a,b)", ""},
		{&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: web}}, "app=web,tier in (a,b)", ""},
		{&batchv1.Job{Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u1"}}}},
			"batch.kubernetes.io/controller-uid=u1", ""},
		{&corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "old"}}}, "app=old", ""},
		{&corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}, "app=web", ""},
		{&corev1.Service{}, "", "selects no pods"},
		{&appsv1.Deployment{}, "", "no pod selector"},
		{&batchv1.CronJob{}, "", "*v1.CronJob has no pod selector"},
		{&corev1.ConfigMap{}, "", "has no pod selector"},
	} {
		sel, err := podSelector(tc.obj)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%T: %v, want an error with %q", tc.obj, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || sel.String() != tc.want):
			t.Errorf("%T: %v %v, want %q", tc.obj, sel, err, tc.want)
		}
	}
}
