package hostpolicy

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
	{"Akamai (Linode) metadata over IPv6", prefixes("fd00:a9fe:a9fe::1/128"), refusedLinkLocal},
	{"Alibaba Cloud metadata", prefixes("100.100.100.200/32"), refusedLinkLocal},
	// Azure's virtual public IP: the WireServer (the VM agent's
	// certificates and extension settings), DNS and health probes. AKS
	// blocks it for pods, but probed is on the host network.
	{"Azure WireServer", prefixes("168.63.129.16/32"), refusedLinkLocal},
	{"loopback", prefixes("127.0.0.0/8", "::1/128"), refusedLoopback},
	{"unspecified (connecting there reaches the node itself)", prefixes("0.0.0.0/32", "::/128"), refusedUnspecified},
}

// v4InV6Rule is an IPv6 prefix whose addresses carry an IPv4 address and
// can reach it: through a NAT64 gateway (RFC 6052), a 6to4 relay (RFC
// 3056), or an automatic tunnel or stateless translator (the deprecated
// IPv4-compatible form of RFC 4291, SIIT's IPv4-translated form of RFC
// 2765). An address in it is judged as each IPv4 address it may carry.
type v4InV6Rule struct {
	what string
	// via names the form in the refusal: "<via> a.b.c.d, which is ...".
	via    string
	prefix netip.Prefix
	// layouts are where the IPv4 address's four bytes are, one layout per
	// position it may have: a network may carve a NAT64 prefix of any RFC
	// 6052 length out of a local-use prefix, and probed cannot know which.
	layouts [][4]int
}

// The RFC 6052 layouts, by prefix length (bits 64-71 are the reserved "u"
// octet, skipped).
var (
	at96 = [4]int{12, 13, 14, 15}
	at64 = [4]int{9, 10, 11, 12}
	at56 = [4]int{7, 9, 10, 11}
	at48 = [4]int{6, 7, 9, 10}
)

var v4InV6Rules = []v4InV6Rule{
	{"the well-known NAT64 prefix (RFC 6052)", "NAT64 for", netip.MustParsePrefix("64:ff9b::/96"), [][4]int{at96}},
	{"the local-use NAT64 prefix (RFC 8215), the IPv4 address read at the position of each prefix length a network may use in it (/48, /56, /64, /96)",
		"NAT64 for", netip.MustParsePrefix("64:ff9b:1::/48"), [][4]int{at48, at56, at64, at96}},
	{"6to4 (RFC 3056; `2002:a9fe:a9fe::/48` is 169.254.169.254)", "6to4 for",
		netip.MustParsePrefix("2002::/16"), [][4]int{{2, 3, 4, 5}}},
	{"IPv4-compatible addresses (RFC 4291, deprecated; `::a9fe:a9fe` is 169.254.169.254)", "IPv4-compatible form of",
		netip.MustParsePrefix("::/96"), [][4]int{at96}},
	{"IPv4-translated addresses (SIIT, RFC 2765; `::ffff:0:a9fe:a9fe` is 169.254.169.254)", "IPv4-translated form of",
		netip.MustParsePrefix("::ffff:0:0:0/96"), [][4]int{at96}},
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

// v4Carried is an IPv4 address an IPv6 address may carry, and how.
type v4Carried struct {
	addr netip.Addr
	via  string
}

// v4InV6 returns the IPv4 addresses an IPv6 address may carry: one per
// layout of each rule whose prefix holds it, leaving out 0.0.0.0/8 ("this
// network"), which nothing forwards to, and which the unused positions of
// an address in another layout read as (and ::1, IPv4-compatible 0.0.0.1,
// is loopback already).
func v4InV6(a netip.Addr) []v4Carried {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	var out []v4Carried
	for _, r := range v4InV6Rules {
		if !r.prefix.Contains(a) {
			continue
		}
		for _, l := range r.layouts {
			if b[l[0]] != 0 {
				out = append(out, v4Carried{netip.AddrFrom4([4]byte{b[l[0]], b[l[1]], b[l[2]], b[l[3]]}), r.via})
			}
		}
	}
	return out
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
	for _, r := range v4InV6Rules {
		fmt.Fprintf(&sb, "| any of the above through %s: `%s` | `%s a.b.c.d, which is …` |\n", r.what, prefixText(r.prefix), r.via)
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
