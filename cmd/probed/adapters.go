package main

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type (
	metav1ListOptions = metav1.ListOptions
	typesUID          = types.UID
)

// podGetterFunc adapts a function to status.PodGetter.
type podGetterFunc func(types.UID) (*v1.Pod, bool)

func (f podGetterFunc) Pod(uid types.UID) (*v1.Pod, bool) { return f(uid) }
