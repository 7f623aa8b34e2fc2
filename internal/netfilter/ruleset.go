package netfilter

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/policy"
)

// This file holds the ruleset as data: chains of rules, each a fixed sequence of
// optional matches and one statement. The same data renders as nft text (String)
// and as netlink expressions (nft.go), so what is printed is what is installed.

// family is the address family a rule matches (meta nfproto).
type family uint8

const (
	famAny  family = 0
	famIPv4 family = 4
	famIPv6 family = 6
)

// verdict is the statement that ends a rule.
type verdict uint8

const (
	vAccept verdict = iota + 1
	// vDrop drops the packet: a send(2) of a refused UDP datagram fails with EPERM.
	vDrop
	// vReset answers a refused TCP SYN with a reset: connect(2) fails with
	// ECONNREFUSED at once.
	vReset
	// vDNAT rewrites the destination address to natTo (the port is kept).
	vDNAT
	// vMasq rewrites the source address to the output interface's.
	vMasq
)

// ct state bits (nf_conntrack_common.h).
const (
	ctInvalid     = 1
	ctEstablished = 2
	ctRelated     = 4
)

// nrule is one rule. Its matches are checked in the order of the fields; a zero
// field does not match anything (it is left out).
type nrule struct {
	ctState uint32 // ct state is one of these bits
	ctDNAT  bool   // ct status dnat: the connection's destination was rewritten
	oifLo   bool   // leaves by the loopback interface (index 1)
	iifLo   bool   // came in by the loopback interface
	iifname string // came in by the interface of that name
	oifname string // leaves by the interface of that name
	fam     family
	proto   policy.Proto // policy.TCP or policy.UDP, 0 for any
	saddr   []netip.Prefix
	daddr   []netip.Prefix
	dport   []policy.PortRange // requires proto
	verdict verdict
	natTo   netip.Addr // vDNAT only
	comment string
}

// chain is a base chain of the table.
type chain struct {
	name     string
	typ      string // "filter" or "nat"
	hook     string // "output", "input", "prerouting" or "postrouting"
	priority int
	drop     bool // policy drop (else accept)
	rules    []nrule
}

func (c *chain) add(r nrule) { c.rules = append(c.rules, r) }

// ruleset is the table installed in the sandbox's network namespace.
type ruleset struct {
	chains []chain
}

// text renders the ruleset as an nft script (the syntax of `nft list table`).
func (rs *ruleset) text(b *strings.Builder) {
	fmt.Fprintf(b, "table inet %s {\n", tableName)
	for i, c := range rs.chains {
		if i > 0 {
			b.WriteString("\n")
		}
		pol := "accept"
		if c.drop {
			pol = "drop"
		}
		fmt.Fprintf(b, "\tchain %s {\n\t\ttype %s hook %s priority %d; policy %s;\n", c.name, c.typ, c.hook, c.priority, pol)
		for _, r := range c.rules {
			b.WriteString("\t\t")
			b.WriteString(r.text())
			b.WriteString("\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
}

// text renders one rule in nft syntax.
func (r *nrule) text() string {
	var parts []string
	if r.ctState != 0 {
		var s []string
		if r.ctState&ctInvalid != 0 {
			s = append(s, "invalid")
		}
		if r.ctState&ctEstablished != 0 {
			s = append(s, "established")
		}
		if r.ctState&ctRelated != 0 {
			s = append(s, "related")
		}
		parts = append(parts, "ct state "+strings.Join(s, ","))
	}
	if r.ctDNAT {
		parts = append(parts, "ct status dnat")
	}
	if r.oifLo {
		parts = append(parts, `oif "lo"`)
	}
	if r.iifLo {
		parts = append(parts, `iif "lo"`)
	}
	if r.iifname != "" {
		parts = append(parts, "iifname "+strconv.Quote(r.iifname))
	}
	if r.oifname != "" {
		parts = append(parts, "oifname "+strconv.Quote(r.oifname))
	}
	ipk := "ip"
	if r.fam == famIPv6 {
		ipk = "ip6"
	}
	if r.fam != famAny && r.saddr == nil && r.daddr == nil {
		parts = append(parts, "meta nfproto ipv"+strconv.Itoa(int(r.fam)))
	}
	if r.saddr != nil {
		parts = append(parts, ipk+" saddr "+prefixText(r.saddr))
	}
	if r.daddr != nil {
		parts = append(parts, ipk+" daddr "+prefixText(r.daddr))
	}
	if r.proto != 0 && r.dport == nil {
		parts = append(parts, "meta l4proto "+r.proto.String())
	}
	if r.dport != nil {
		parts = append(parts, r.proto.String()+" dport "+portText(r.dport))
	}
	switch r.verdict {
	case vAccept:
		parts = append(parts, "accept")
	case vDrop:
		parts = append(parts, "drop")
	case vReset:
		parts = append(parts, "reject with tcp reset")
	case vDNAT:
		parts = append(parts, "dnat "+ipk+" to "+r.natTo.String())
	case vMasq:
		parts = append(parts, "masquerade")
	}
	if r.comment != "" {
		parts = append(parts, "comment "+strconv.Quote(r.comment))
	}
	return strings.Join(parts, " ")
}

func prefixText(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			s[i] = p.Addr().String()
		} else {
			s[i] = p.String()
		}
	}
	if len(s) == 1 {
		return s[0]
	}
	return "{ " + strings.Join(s, ", ") + " }"
}

func portText(rs []policy.PortRange) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	if len(s) == 1 {
		return s[0]
	}
	return "{ " + strings.Join(s, ", ") + " }"
}

// addrInterval is an inclusive range of addresses of one family.
type addrInterval struct{ lo, hi netip.Addr }

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

// mergePrefixes returns the prefixes (all of one family) as sorted, disjoint,
// non-adjacent intervals.
func mergePrefixes(ps []netip.Prefix) []addrInterval {
	iv := make([]addrInterval, 0, len(ps))
	for _, p := range ps {
		iv = append(iv, addrInterval{p.Masked().Addr(), lastAddr(p)})
	}
	slices.SortFunc(iv, func(a, b addrInterval) int { return a.lo.Compare(b.lo) })
	var out []addrInterval
	for _, v := range iv {
		if n := len(out); n > 0 {
			last := &out[n-1]
			next := last.hi.Next()
			if v.lo.Compare(last.hi) <= 0 || (next.IsValid() && v.lo == next) {
				if v.hi.Compare(last.hi) > 0 {
					last.hi = v.hi
				}
				continue
			}
		}
		out = append(out, v)
	}
	return out
}

// dedupPrefixes returns ps masked, without duplicates, in their first order.
func dedupPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
