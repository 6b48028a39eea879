package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podGetterFunc adapts a function to status.PodGetter; the writer and the
// manager read pods from the same informer cache.
type podGetterFunc func(types.UID) (*v1.Pod, bool)

func (f podGetterFunc) Pod(uid types.UID) (*v1.Pod, bool) { return f(uid) }
