package nodeinfo

import (
	"context"
	"net/netip"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// nodeAddressTTL is how long the Node's addresses are reused before the API
// server is asked again: they rarely change, and one GET a minute from every
// node of a large cluster would add up.
const nodeAddressTTL = 10 * time.Minute

// Addresses returns a hostpolicy.GuardOptions.NodeAddrs that reads the
// IP addresses in the Node's status.addresses (host names are skipped), at
// most once every 10 minutes.
//
// probed's ClusterRole does not grant nodes/get (contract §7): where the
// API server refuses, the first refusal is logged and the Node is not asked
// again, and the guard makes do with the node's interface addresses, which
// cover every address but a NATed external one.
func Addresses(client kubeclient.Interface, nodeName string) func(context.Context) ([]netip.Addr, error) {
	var (
		mu      sync.Mutex
		denied  bool
		last    []netip.Addr
		fetched time.Time
	)
	return func(ctx context.Context) ([]netip.Addr, error) {
		mu.Lock()
		defer mu.Unlock()
		if denied {
			return nil, nil
		}
		if !fetched.IsZero() && time.Since(fetched) < nodeAddressTTL {
			return last, nil
		}
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if apierrors.IsForbidden(err) {
			denied = true
			klog.InfoS("No permission to read the Node; the probe host policy uses the node's interface addresses only", "node", nodeName)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out := make([]netip.Addr, 0, len(node.Status.Addresses))
		for _, a := range node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip)
			}
		}
		last, fetched = out, time.Now()
		return out, nil
	}
}
