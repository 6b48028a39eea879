package hostpolicy

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/security.md's deny-node-local table from the code")

// The table's place in docs/security.md.
const (
	tableBegin = "<!-- BEGIN deny-node-local table: generated from pkg/hostpolicy/table.go; go test ./pkg/hostpolicy -run TestNodeLocalTableInDocs -update-docs -->\n"
	tableEnd   = "<!-- END deny-node-local table -->\n"
)

// TestNodeLocalTableInDocs keeps the list in one place: the table users read
// in docs/security.md is the one the guard applies.
func TestNodeLocalTableInDocs(t *testing.T) {
	const path = "../../docs/security.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no table between %q and %q", path, tableBegin, tableEnd)
	}
	got, want := doc[i+len(tableBegin):j], NodeLocalTable()
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(doc[:i+len(tableBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/security.md's deny-node-local table differs from the code's; rerun with -update-docs.\ngot:\n%s\nwant:\n%s", got, want)
}

// TestNodeLocalTableRefusesWhatItLists: the guard refuses the first and
// the last address of every fixed row's ranges, with the row's reason.
func TestNodeLocalTableRefusesWhatItLists(t *testing.T) {
	g := NewGuard(DenyNodeLocal, GuardOptions{InterfaceAddrs: staticAddrs()})
	for _, r := range nodeLocalRules {
		for _, p := range r.prefixes {
			for _, a := range []netip.Addr{p.Masked().Addr(), lastAddr(p)} {
				err := g.CheckAddr(a, nil)
				var re *RefusedError
				if !errors.As(err, &re) || re.Reason != r.reason {
					t.Errorf("%s (%s, row %q): %v; want refused as %q", a, p, r.what, err, r.reason)
				}
			}
		}
	}
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
