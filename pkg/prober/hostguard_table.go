package prober

import (
	"fmt"
	"net/netip"
	"strings"
)

// The fixed addresses deny-node-local refuses live here, and only here:
// docs/security.md's table is rendered from these two tables (NodeLocalTable)
// and a test fails when the two disagree. Add an address by adding a row.

// nodeLocalRule is one kind of address deny-node-local refuses.
type nodeLocalRule struct {
	// what is the table's words for it.
	what     string
	prefixes []netip.Prefix
	// reason is the RefusedError's Reason.
	reason string
}

// nodeLocalRules: link-local and metadata first, so a metadata address in
// a link-local range is named as such.
var nodeLocalRules = []nodeLocalRule{
	{"link-local", prefixes("169.254.0.0/16", "fe80::/10"), refusedLinkLocal},
	{"link-local multicast", prefixes("224.0.0.0/24", "ff02::/16"), refusedLinkLocal},
	// 169.254.169.254 (AWS, GCP, Azure IMDS, OpenStack, Oracle, DigitalOcean, ...)
	// and 169.254.42.42 (Scaleway) are link-local already.
	{"AWS instance metadata over IPv6", prefixes("fd00:ec2::254/128"), refusedLinkLocal},
	{"GCP metadata server over IPv6", prefixes("fd20:ce::254/128"), refusedLinkLocal},
	{"Scaleway metadata over IPv6", prefixes("fd00:42::42/128"), refusedLinkLocal},
	{"Alibaba Cloud metadata", prefixes("100.100.100.200/32"), refusedLinkLocal},
	// Azure's virtual public IP: the WireServer (the VM agent's
	// certificates and extension settings), DNS and health probes. AKS
	// blocks it for pods, but probed is on the host network.
	{"Azure WireServer", prefixes("168.63.129.16/32"), refusedLinkLocal},
	{"loopback", prefixes("127.0.0.0/8", "::1/128"), refusedLoopback},
	{"unspecified (connecting there reaches the node itself)", prefixes("0.0.0.0/32", "::/128"), refusedUnspecified},
}

// nat64Rule is a NAT64 prefix: an address in it reaches, through the
// node's NAT64 gateway, the IPv4 address embedded in it (RFC 6052), so it
// is judged as that IPv4 address.
type nat64Rule struct {
	what   string
	prefix netip.Prefix
	// lengths are the RFC 6052 prefix lengths whose embedding positions are
	// read: a network may carve any of them out of a local-use prefix, and
	// probed cannot know which, so each is judged.
	lengths []int
}

var nat64Rules = []nat64Rule{
	{"the well-known NAT64 prefix (RFC 6052)", netip.MustParsePrefix("64:ff9b::/96"), []int{96}},
	{"the local-use NAT64 prefix (RFC 8215), the IPv4 address read at the position of each prefix length a network may use in it (/48, /56, /64, /96)",
		netip.MustParsePrefix("64:ff9b:1::/48"), []int{48, 56, 64, 96}},
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// fixedNodeLocal says why a canonical address is in nodeLocalRules, or "".
func fixedNodeLocal(a netip.Addr) string {
	for _, r := range nodeLocalRules {
		for _, p := range r.prefixes {
			if p.Contains(a) {
				return r.reason
			}
		}
	}
	return ""
}

// nat64Embedded returns the IPv4 addresses a NAT64 address may stand for:
// one per embedding position of its prefix, leaving out 0.0.0.0/8 ("this
// network"), which no translator forwards to and which the unused
// positions of an address in another layout read as.
func nat64Embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	var out []netip.Addr
	for _, r := range nat64Rules {
		if !r.prefix.Contains(a) {
			continue
		}
		for _, n := range r.lengths {
			v4 := rfc6052IPv4(b, n)
			if v4.As4()[0] != 0 {
				out = append(out, v4)
			}
		}
	}
	return out
}

// rfc6052IPv4 reads the IPv4 address embedded after a prefix of n bits
// (RFC 6052 section 2.2: bits 64-71 are the reserved "u" octet, skipped).
func rfc6052IPv4(b [16]byte, n int) netip.Addr {
	var v [4]byte
	switch n {
	case 32:
		v = [4]byte{b[4], b[5], b[6], b[7]}
	case 40:
		v = [4]byte{b[5], b[6], b[7], b[9]}
	case 48:
		v = [4]byte{b[6], b[7], b[9], b[10]}
	case 56:
		v = [4]byte{b[7], b[9], b[10], b[11]}
	case 64:
		v = [4]byte{b[9], b[10], b[11], b[12]}
	default: // 96
		v = [4]byte{b[12], b[13], b[14], b[15]}
	}
	return netip.AddrFrom4(v)
}

// NodeLocalTable renders what deny-node-local refuses as docs/security.md's
// Markdown table.
func NodeLocalTable() string {
	var sb strings.Builder
	sb.WriteString("| refused | reason in the message |\n|---|---|\n")
	for _, r := range nodeLocalRules {
		lits := make([]string, len(r.prefixes))
		for i, p := range r.prefixes {
			lits[i] = "`" + prefixText(p) + "`"
		}
		fmt.Fprintf(&sb, "| %s: %s | `%s` |\n", r.what, strings.Join(lits, ", "), r.reason)
	}
	fmt.Fprintf(&sb, "| the node's own addresses (see below) | `%s` |\n", refusedNode)
	for _, r := range nat64Rules {
		fmt.Fprintf(&sb, "| any of the above through %s: `%s` | `NAT64 for a.b.c.d, which is …` |\n", r.what, prefixText(r.prefix))
	}
	fmt.Fprintf(&sb, "| no host and no pod IP (the dial would go to `:port` on this node) | `%s` |\n", refusedNoHost)
	return sb.String()
}

// prefixText writes a single-address prefix as the address.
func prefixText(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
