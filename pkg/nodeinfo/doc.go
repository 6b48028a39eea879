// Package nodeinfo reads what probed needs of its own Node object: its
// addresses, which the probe host policy refuses, and its kubelet's version,
// which probes send in their User-Agent as the kubelet does. Both make do
// without the Node where probed may not read it.
package nodeinfo
