package prober

import "net"

// newProbeDialer returns the dialer every network probe uses. Probes open a
// connection per check, so on busy nodes their sockets would pile up in
// TIME-WAIT for the OS default of 60s; a 1s SO_LINGER (not 0, which would
// reset the connection instead of closing it cleanly) keeps that short, as
// the kubelet's ProbeDialer does (kubernetes issue 89898).
func newProbeDialer() *net.Dialer {
	return &net.Dialer{Control: lingerControl}
}
