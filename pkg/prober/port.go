package prober

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// resolvePort turns an httpGet or tcpSocket port into a number the way the
// kubelet does: a number is taken as is; a string is first looked up as a
// container port name and then, as a last resort, parsed as a number. The
// errors carry the kubelet's texts because users see them in events.
func resolvePort(param intstr.IntOrString, ports []v1.ContainerPort) (int, error) {
	var port int
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		named, ok := findNamedPort(ports, param.StrVal)
		if ok {
			port = named
			break
		}
		n, err := strconv.Atoi(param.StrVal)
		if err != nil {
			return n, err
		}
		port = n
	default:
		return -1, fmt.Errorf("intOrString had no kind: %+v", param)
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
