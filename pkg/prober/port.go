package prober

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// resolvePort turns an httpGet or tcpSocket port into a number as the
// kubelet's ResolveContainerPort (1.37) does: a number is taken as is; a
// string is a container port's name. The errors carry the kubelet's texts
// because users see them in events.
func resolvePort(param intstr.IntOrString, ports []v1.ContainerPort) (int, error) {
	port := -1
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		named, ok := findNamedPort(ports, param.StrVal)
		if !ok {
			return 0, fmt.Errorf("port %q not found", param.StrVal)
		}
		port = named
	default:
		return port, fmt.Errorf("intOrString had no kind: %+v", param)
	}
	if port < 1 || port > 65535 {
		return port, fmt.Errorf("invalid port number: %v", port)
	}
	return port, nil
}

// findNamedPort returns the containerPort of the first port called name.
func findNamedPort(ports []v1.ContainerPort, name string) (int, bool) {
	for _, p := range ports {
		if p.Name == name {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}
