// Package deps pins the module's dependencies while the packages that use them are written.
package deps

import (
	_ "github.com/containerd/containerd"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "go.uber.org/goleak"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health/grpc_health_v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/validation"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/klog/v2"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)
