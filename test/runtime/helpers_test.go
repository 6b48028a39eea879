//go:build runtime

package runtimetest

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

func stopRequest(id string, timeoutSeconds int64) *runtimeapi.StopContainerRequest {
	return &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeoutSeconds}
}
