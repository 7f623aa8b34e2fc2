package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// The network comparison of Diff.
//
// A net= rule covers a box: protocols x addresses x ports x directions. Every
// boundary of every rule of both profiles (each prefix's first address and the
// one after its last, each port range's first port and the one after its last)
// cuts the address and port axes into intervals on which every rule, and so both
// profiles' decisions, are constant. For each ALLOW rule R of the new profile,
// each cell of that grid inside R is decided once by each profile (at the cell's
// first address and port): a cell that the new profile allows through R and the
// old one refuses is a grant of R. The number of cells is bounded
// (diffNetBudget): past it, R is reported as a grant with a reason that says it
// could not be compared (fail closed: a grant is never hidden).

// diffNetBudget bounds the work of the network comparison of one Diff, in rule
// evaluations.
const diffNetBudget = 20_000_000

// netGrid holds the boundaries of each axis, sorted and unique.
type netGrid struct {
	v4, v6 []netip.Addr
	ports  []int // 0..65536
}

func (d *differ) net() {
	bRules, aRules := d.b.Network().Rules(), d.a.Network().Rules()
	if len(aRules) == 0 {
		return
	}
	// A host name means what either load pinned for it.
	pins := map[string][]netip.Addr{}
	for _, n := range []*Network{d.b.Network(), d.a.Network()} {
		for h, addrs := range n.pins {
			for _, a := range addrs {
				if !slices.Contains(pins[h], a) {
					pins[h] = append(pins[h], a)
				}
			}
		}
	}
	unify := func(rs []NetRule) {
		for i := range rs {
			if rs[i].Host == "" {
				continue
			}
			ps := make([]netip.Prefix, 0, len(pins[rs[i].Host]))
			for _, a := range pins[rs[i].Host] {
				ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
			}
			rs[i].Prefixes = ps
		}
	}
	unify(bRules)
	unify(aRules)

	var g netGrid
	for _, rs := range [][]NetRule{bRules, aRules} {
		for _, r := range rs {
			for _, p := range r.Prefixes {
				first, last := p.Masked().Addr(), lastAddr(p.Masked())
				axis := &g.v6
				if first.Is4() {
					axis = &g.v4
				}
				*axis = append(*axis, first)
				if next := last.Next(); next.IsValid() {
					*axis = append(*axis, next)
				}
			}
			for _, pr := range r.Ports {
				g.ports = append(g.ports, int(pr.Lo), int(pr.Hi)+1)
			}
		}
	}
	for _, axis := range []*[]netip.Addr{&g.v4, &g.v6} {
		slices.SortFunc(*axis, func(x, y netip.Addr) int { return x.Compare(y) })
		*axis = slices.Compact(*axis)
	}
	slices.Sort(g.ports)
	g.ports = slices.Compact(g.ports)

	budget := diffNetBudget
	for i := range aRules {
		r := &aRules[i]
		if r.Action != Allow || len(r.Ports) == 0 || len(r.Prefixes) == 0 {
			continue
		}
		var ipCuts [][2]netip.Addr // [first, last] of each address interval inside R
		for _, p := range r.Prefixes {
			p = p.Masked()
			first, last := p.Addr(), lastAddr(p)
			axis := g.v6
			if first.Is4() {
				axis = g.v4
			}
			ipCuts = append(ipCuts, cutAddrs(axis, first, last)...)
		}
		var portCuts [][2]int
		for _, pr := range r.Ports {
			portCuts = append(portCuts, cutPorts(g.ports, int(pr.Lo), int(pr.Hi))...)
		}
		protos := splitProtos(r.Protos)
		dirs := splitDirs(r.Dir)
		cells := len(ipCuts) * len(portCuts) * len(protos) * len(dirs)
		cost := cells * (len(aRules) + len(bRules))
		if cells > 0 && cost/cells != len(aRules)+len(bRules) || cost > budget {
			risk, why := hostDependent(r.Raw, r.Network)(gradeNet(r))
			d.add(Grant{Risk: risk, Family: FamilyNet, Grant: r.Raw, Rule: r.Rule,
				Reason: why + " (the profiles hold too many net= rules to compare cell by cell: this rule is reviewed as new)"})
			continue
		}
		budget -= cost
		var first string
		n := 0
		for _, proto := range protos {
			for _, dir := range dirs {
				for _, pc := range portCuts {
					for _, ic := range ipCuts {
						ok, j := netDecide(aRules, proto, ic[0], uint16(pc[0]), dir)
						if !ok || j != i {
							continue
						}
						if was, _ := netDecide(bRules, proto, ic[0], uint16(pc[0]), dir); was {
							continue
						}
						if n == 0 {
							first = fmt.Sprintf("%s %s %s, %s", proto, dirWord(dir), addrRange(ic[0], ic[1]), portRange(pc[0], pc[1]))
						}
						n++
					}
				}
			}
		}
		if n == 0 {
			continue
		}
		risk, why := hostDependent(r.Raw, r.Network)(gradeNet(r))
		what := "allows " + first
		if n > 1 {
			what += fmt.Sprintf(" (and %d more ranges)", n-1)
		}
		what += ", which the old profile refuses"
		d.add(Grant{Risk: risk, Family: FamilyNet, Grant: r.Raw, Rule: r.Rule, Reason: what + ": " + why})
	}
}

// netDecide is Network.Allowed over rules: every DENY first, then the first ALLOW
// that matches; it returns the index of the deciding rule (-1 for the default).
func netDecide(rules []NetRule, proto Proto, ip netip.Addr, port uint16, dir Direction) (bool, int) {
	for i := range rules {
		if rules[i].Action == Deny && rules[i].matches(proto, ip, port, dir) {
			return false, i
		}
	}
	for i := range rules {
		if rules[i].Action == Allow && rules[i].matches(proto, ip, port, dir) {
			return true, i
		}
	}
	return false, -1
}

// cutAddrs splits [first, last] at the boundaries of axis.
func cutAddrs(axis []netip.Addr, first, last netip.Addr) [][2]netip.Addr {
	var out [][2]netip.Addr
	start := first
	i, _ := slices.BinarySearchFunc(axis, first, func(x, y netip.Addr) int { return x.Compare(y) })
	for ; i < len(axis); i++ {
		b := axis[i]
		if b.Compare(start) <= 0 {
			continue
		}
		if b.Compare(last) > 0 {
			break
		}
		out = append(out, [2]netip.Addr{start, b.Prev()})
		start = b
	}
	return append(out, [2]netip.Addr{start, last})
}

// cutPorts splits [lo, hi] at the boundaries of axis.
func cutPorts(axis []int, lo, hi int) [][2]int {
	var out [][2]int
	start := lo
	i, _ := slices.BinarySearch(axis, lo)
	for ; i < len(axis); i++ {
		b := axis[i]
		if b <= start {
			continue
		}
		if b > hi {
			break
		}
		out = append(out, [2]int{start, b - 1})
		start = b
	}
	return append(out, [2]int{start, hi})
}

func splitProtos(p Proto) []Proto {
	var out []Proto
	for _, q := range []Proto{TCP, UDP} {
		if p&q != 0 {
			out = append(out, q)
		}
	}
	return out
}

func splitDirs(d Direction) []Direction {
	var out []Direction
	for _, q := range []Direction{Out, In} {
		if d&q != 0 {
			out = append(out, q)
		}
	}
	return out
}

func dirWord(d Direction) string {
	if d == In {
		return "IN on"
	}
	return "OUT to"
}

// addrRange renders [first, last] as an address, a CIDR or "first-last".
func addrRange(first, last netip.Addr) string {
	if first == last {
		return first.String()
	}
	for bits := 0; bits <= first.BitLen(); bits++ {
		p := netip.PrefixFrom(first, bits).Masked()
		if p.Addr() == first && lastAddr(p) == last {
			switch {
			case bits == 0 && first.Is4():
				return "any IPv4 address"
			case bits == 0:
				return "any IPv6 address"
			}
			return p.String()
		}
	}
	return first.String() + "-" + last.String()
}

// portRange renders [lo, hi]: "port 443", "ports 8000-8999" or "any port".
func portRange(lo, hi int) string {
	switch {
	case lo == hi:
		return "port " + strconv.Itoa(lo)
	case lo == 0 && hi == 65535:
		return "any port"
	}
	return "ports " + strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}
