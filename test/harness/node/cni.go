package node

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
)

// cniConfList is the pod network: a bridge whose address is the subnet's
// gateway (so the host, where probed runs, reaches pod IPs directly) with
// host-local IPAM kept in the run dir. No masquerading and no routes beyond
// the bridge: a pod reaches the host and the other pods, nothing else. The
// CRI plugin adds the loopback interface itself; portmap serves hostPort.
func cniConfList(network, bridge, subnet, ipamDir string) ([]byte, error) {
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		return nil, err
	}
	gw := n.IP.To4()
	gw = net.IPv4(gw[0], gw[1], gw[2], gw[3]+1)
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       network,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": subnet, "gateway": gw.String()}}},
					"dataDir": ipamDir,
				},
			},
			map[string]any{
				"type":         "portmap",
				"capabilities": map[string]bool{"portMappings": true},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// deleteBridge removes the pod bridge; a bridge that was never created (no
// pod ran) or is already gone is fine.
func deleteBridge(name string) error {
	if name == "" || !linkExists(name) {
		return nil
	}
	out, err := exec.Command("ip", "link", "delete", name).CombinedOutput()
	if err != nil && linkExists(name) {
		return fmt.Errorf("ip link delete %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
