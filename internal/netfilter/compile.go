package netfilter

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/pysandboxes/pysandboxes/policy"
)

// The sandbox's side of the egress network: slirp4netns's defaults.
const (
	// TapName is the interface the egress stack creates in the sandbox.
	TapName = "tap0"
	// tableName is the nftables table installed in the sandbox's namespace.
	tableName = "pysandboxes"
	// MaxForwards bounds the number of host-loopback ports forwarded into one
	// sandbox (each is a listening socket of the egress stack on the host).
	MaxForwards = 256
	// mtu of the tap interface (slirp4netns's recommended maximum for speed).
	mtu = 65520
)

var (
	// egressNet is the sandbox's egress network (slirp4netns's default). Its
	// addresses are never reachable through net= rules: the egress stack maps them
	// to the host's loopback (gateway) and to the host's resolver.
	egressNet = netip.MustParsePrefix("10.0.2.0/24")
	// gateway is the egress gateway; its traffic reaches the host's 127.0.0.1.
	gateway = netip.MustParseAddr("10.0.2.2")
	// resolver is the DNS resolver the sandbox is given (the egress stack forwards
	// its queries to the host's resolver).
	resolver = netip.MustParseAddr("10.0.2.3")
	// sandboxAddr is the sandbox's address on the egress network.
	sandboxAddr = netip.MustParseAddr("10.0.2.100")

	hostLoopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	unspecified4 = netip.IPv4Unspecified()
	loopback4    = netip.MustParsePrefix("127.0.0.0/8")
	thisNetwork4 = netip.MustParsePrefix("0.0.0.0/8")
)

// protoIndex maps the two protocols to array indexes.
var protos = [2]policy.Proto{policy.TCP, policy.UDP}

// RuleError reports a net= rule that the network filter cannot enforce exactly.
// Compile returns one per such rule (joined with errors.Join).
type RuleError struct {
	// Rule is the rule as written, with its provenance.
	Rule policy.Rule
	// Reason says why, in words.
	Reason string
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("%s: net rule '%s' cannot be enforced by the namespace network filter: %s", e.Rule.Ref, e.Rule.Raw, e.Reason)
}

// Forward is a port of the host's loopback forwarded into the sandbox.
type Forward struct {
	// Proto is policy.TCP or policy.UDP.
	Proto policy.Proto
	// Port is the port on the host's 127.0.0.1 and on the sandbox's 127.0.0.1.
	Port uint16
	// Rule is the ALLOW IN rule that asked for it.
	Rule policy.Rule
}

// Filter is the compiled network filter of one policy. It is immutable and safe
// for concurrent use; Setup can install it in any number of namespaces.
type Filter struct {
	pins     map[string][]netip.Addr
	egress   bool
	hostLoop bool    // some OUT traffic is redirected to the host's loopback
	dns      [2]bool // the resolver is allowed, per protocol (TCP, UDP)
	dnsDeny  [2]*policy.NetRule
	forwards []Forward
	loops    [2][]policy.PortRange // the host-loopback ports of OUT rules, per protocol
	rs       ruleset
	warnings []string
}

// Compile builds the filter of a policy's network rules (n may be empty or nil:
// loopback only). Errors name the rule's file(line) when a rule cannot be
// enforced exactly; they are *RuleError values joined with errors.Join.
func Compile(n *policy.Network) (*Filter, error) {
	f := &Filter{pins: n.Pins()}
	rules := n.Rules()
	var errs []error

	var hostLoop, hostLoopDeny, fwd, fwdDeny [2]portSet
	for i := range rules {
		r := &rules[i]
		if len(r.Ports) == 0 {
			continue // matches nothing (the policy warned)
		}
		has127 := containsAddr(r.Prefixes, hostLoopback)
		if r.Dir&policy.Out != 0 {
			for pi, p := range protos {
				if r.Protos&p == 0 || !has127 {
					continue
				}
				if r.Action == policy.Allow {
					hostLoop[pi].add(r.Ports)
				} else {
					hostLoopDeny[pi].add(r.Ports)
				}
			}
			if r.Action == policy.Allow {
				served, lost := classifyOut(r)
				switch {
				case len(served) == 0:
					errs = append(errs, &RuleError{Rule: r.Rule, Reason: strings.Join(lost, "; ")})
				default:
					f.egress = true
					if len(lost) > 0 && !r.Any {
						f.warnings = append(f.warnings, fmt.Sprintf("%s: net rule '%s': %s; the rule is enforced for %s",
							r.Ref, r.Raw, strings.Join(lost, "; "), prefixList(served)))
					}
				}
			}
		}
		if r.Dir&policy.In != 0 {
			switch {
			case r.Action == policy.Allow && forwardable(r):
				for pi, p := range protos {
					if r.Protos&p == 0 {
						continue
					}
					var s portSet
					s.add(r.Ports)
					s.removeRange(0, 0)
					if n := s.count(); n > MaxForwards {
						errs = append(errs, &RuleError{Rule: r.Rule, Reason: fmt.Sprintf(
							"it asks to forward %d %s ports from the host's loopback into the sandbox, at most %d can be: narrow its PORTS, or write * as its network (listening inside the sandbox, not forwarded)",
							n, p, MaxForwards)})
						continue
					}
					fwd[pi].add(s.ranges())
				}
			case r.Action == policy.Deny && (has127 || containsAddr(r.Prefixes, unspecified4)):
				for pi, p := range protos {
					if r.Protos&p != 0 {
						fwdDeny[pi].add(r.Ports)
					}
				}
			}
		}
	}
	total := 0
	for pi := range protos {
		for _, r := range hostLoopDeny[pi].ranges() {
			hostLoop[pi].removeRange(r.Lo, r.Hi)
		}
		for _, r := range fwdDeny[pi].ranges() {
			fwd[pi].removeRange(r.Lo, r.Hi)
		}
		total += fwd[pi].count()
		if !hostLoop[pi].empty() {
			f.hostLoop = true
			f.loops[pi] = hostLoop[pi].ranges()
		}
	}
	if total > MaxForwards {
		var refs []string
		for i := range rules {
			if r := &rules[i]; r.Action == policy.Allow && r.Dir&policy.In != 0 && len(r.Ports) > 0 && forwardable(r) {
				refs = append(refs, r.Ref.String())
			}
		}
		errs = append(errs, fmt.Errorf("%s: the ALLOW IN rules on the loopback address forward %d ports from the host's loopback into the sandbox, at most %d can be: narrow their PORTS",
			strings.Join(refs, ", "), total, MaxForwards))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for pi, p := range protos {
		for _, pr := range fwd[pi].ranges() {
			for port := int(pr.Lo); port <= int(pr.Hi); port++ {
				f.forwards = append(f.forwards, Forward{Proto: p, Port: uint16(port), Rule: forwardRule(rules, p, uint16(port))})
			}
		}
	}
	if len(f.forwards) > 0 {
		f.egress = true
	}
	if !f.egress {
		return f, nil
	}
	for pi, p := range protos {
		f.dns[pi] = true
		for i := range rules {
			if r := &rules[i]; r.Action == policy.Deny && r.Matches(p, resolver, 53, policy.Out) {
				f.dns[pi], f.dnsDeny[pi] = false, r
				break
			}
		}
	}
	f.build(rules, hostLoop, fwd)
	return f, nil
}

// classifyOut splits the prefixes of an ALLOW OUT rule into those the filter can
// let through (served) and the reasons the others cannot be reached.
func classifyOut(r *policy.NetRule) (served []netip.Prefix, lost []string) {
	var v6, loop, vnet, this []string
	for _, p := range r.Prefixes {
		switch {
		case p.Addr().Is6():
			v6 = append(v6, prefixString(p))
		case p.Bits() >= 8 && loopback4.Contains(p.Addr()) && !p.Contains(hostLoopback):
			loop = append(loop, prefixString(p))
		case p.Bits() >= egressNet.Bits() && egressNet.Contains(p.Addr()):
			vnet = append(vnet, prefixString(p))
		case p.Bits() >= 8 && thisNetwork4.Contains(p.Addr()):
			this = append(this, prefixString(p))
		default:
			served = append(served, p)
		}
	}
	if len(v6) > 0 {
		lost = append(lost, fmt.Sprintf("IPv6 traffic (%s) cannot leave the sandbox, whose network is IPv4 only", strings.Join(v6, ", ")))
	}
	if len(loop) > 0 {
		lost = append(lost, fmt.Sprintf("%s is the sandbox's own loopback: of the host's loopback only 127.0.0.1 is reachable from the sandbox", strings.Join(loop, ", ")))
	}
	if len(vnet) > 0 {
		lost = append(lost, fmt.Sprintf("%s lies in the sandbox's egress network %s, whose addresses are not the hosts of that name", strings.Join(vnet, ", "), egressNet))
	}
	if len(this) > 0 {
		lost = append(lost, fmt.Sprintf("%s is not a destination address", strings.Join(this, ", ")))
	}
	return served, lost
}

// forwardable reports whether an ALLOW IN rule asks for its ports to be forwarded
// from the host's loopback: its network is a loopback address or network holding
// 127.0.0.1 (127.0.0.1, localhost, 127.0.0.0/8) or the IPv4 wildcard 0.0.0.0.
// A rule for every address (*) or a wider network only lets the program listen.
func forwardable(r *policy.NetRule) bool {
	if r.Any {
		return false
	}
	for _, p := range r.Prefixes {
		if p.Addr().Is4() && p.Bits() >= 8 && loopback4.Contains(p.Addr()) && p.Contains(hostLoopback) {
			return true
		}
		if p == netip.PrefixFrom(unspecified4, 32) {
			return true
		}
	}
	return false
}

// forwardRule returns the first forwardable ALLOW IN rule covering the port.
func forwardRule(rules []policy.NetRule, p policy.Proto, port uint16) policy.Rule {
	for i := range rules {
		r := &rules[i]
		if r.Action != policy.Allow || r.Dir&policy.In == 0 || r.Protos&p == 0 || !forwardable(r) {
			continue
		}
		for _, pr := range r.Ports {
			if pr.Contains(port) {
				return r.Rule
			}
		}
	}
	return policy.Rule{}
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func prefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = prefixString(p)
	}
	return strings.Join(s, ", ")
}

// build makes the ruleset (see the package documentation for its shape).
func (f *Filter) build(rules []policy.NetRule, hostLoop, fwd [2]portSet) {
	out := chain{name: "output", typ: "filter", hook: "output", priority: -150, drop: true}
	out.add(nrule{ctState: ctEstablished | ctRelated, verdict: vAccept})
	out.add(nrule{oifLo: true, verdict: vAccept, comment: "the sandbox's own loopback; 127.0.0.1 ports allowed by OUT rules go on to the host's"})
	out.add(nrule{ctState: ctInvalid, verdict: vDrop})
	// A socket bound to the tap interface (SO_BINDTODEVICE needs no privilege)
	// could send loopback destinations out by it, and slirp4netns would connect
	// to the host's loopback at that address: the loopback network leaves only
	// through the redirections of nat_output (to the gateway, by lo first).
	out.add(nrule{fam: famIPv4, proto: policy.TCP, daddr: []netip.Prefix{loopback4}, verdict: vReset, comment: "the loopback network never leaves by the tap interface"})
	out.add(nrule{fam: famIPv4, daddr: []netip.Prefix{loopback4}, verdict: vDrop, comment: "the loopback network never leaves by the tap interface"})
	out.add(nrule{fam: famIPv6, daddr: []netip.Prefix{netip.PrefixFrom(netip.IPv6Loopback(), 128)}, verdict: vDrop, comment: "the loopback network never leaves by the tap interface"})
	for i := range rules {
		if r := &rules[i]; r.Action == policy.Deny && r.Dir&policy.Out != 0 {
			emit(&out, r, false)
		}
	}
	for pi, p := range protos {
		if f.dns[pi] {
			out.add(nrule{fam: famIPv4, proto: p, daddr: []netip.Prefix{netip.PrefixFrom(resolver, 32)},
				dport: []policy.PortRange{{Lo: 53, Hi: 53}}, verdict: vAccept, comment: "DNS to the sandbox's resolver"})
		}
	}
	out.add(nrule{fam: famIPv4, proto: policy.TCP, daddr: []netip.Prefix{egressNet}, verdict: vReset, comment: "the egress network itself"})
	out.add(nrule{fam: famIPv4, daddr: []netip.Prefix{egressNet}, verdict: vDrop, comment: "the egress network itself"})
	for i := range rules {
		if r := &rules[i]; r.Action == policy.Allow && r.Dir&policy.Out != 0 {
			emit(&out, r, true)
		}
	}
	out.add(nrule{proto: policy.TCP, verdict: vReset, comment: "DENIED by implicit default policy"})

	in := chain{name: "input", typ: "filter", hook: "input", priority: 0, drop: true}
	in.add(nrule{ctState: ctEstablished | ctRelated, verdict: vAccept})
	in.add(nrule{iifLo: true, verdict: vAccept})
	for pi, p := range protos {
		if rs := fwd[pi].ranges(); len(rs) > 0 {
			in.add(nrule{iifname: TapName, ctDNAT: true, fam: famIPv4, proto: p, dport: rs, verdict: vAccept,
				comment: "ports forwarded from the host's loopback"})
		}
	}
	f.rs.chains = append(f.rs.chains, out, in)

	if f.hostLoop {
		nat := chain{name: "nat_output", typ: "nat", hook: "output", priority: -100}
		for pi, p := range protos {
			if rs := hostLoop[pi].ranges(); len(rs) > 0 {
				nat.add(nrule{fam: famIPv4, daddr: []netip.Prefix{netip.PrefixFrom(hostLoopback, 32)}, proto: p, dport: rs,
					verdict: vDNAT, natTo: gateway, comment: "to the host's loopback"})
			}
		}
		post := chain{name: "nat_postrouting", typ: "nat", hook: "postrouting", priority: 100}
		post.add(nrule{oifname: TapName, fam: famIPv4, saddr: []netip.Prefix{loopback4}, verdict: vMasq})
		f.rs.chains = append(f.rs.chains, nat, post)
	}
	if len(f.forwards) > 0 {
		pre := chain{name: "nat_prerouting", typ: "nat", hook: "prerouting", priority: -100}
		for pi, p := range protos {
			if rs := fwd[pi].ranges(); len(rs) > 0 {
				pre.add(nrule{iifname: TapName, fam: famIPv4, proto: p, dport: rs, verdict: vDNAT, natTo: hostLoopback,
					comment: "forwarded from the host's loopback"})
			}
		}
		f.rs.chains = append(f.rs.chains, pre)
	}
}

// emit adds the rules of one OUT rule: one per protocol and address family.
func emit(c *chain, r *policy.NetRule, allow bool) {
	ports := mergePorts(r.Ports)
	if allPorts(ports) {
		ports = nil
	}
	comment := r.Ref.String() + ": " + r.Raw
	if len(comment) > 120 {
		comment = comment[:117] + "..."
	}
	for _, p := range protos {
		if r.Protos&p == 0 {
			continue
		}
		v := vAccept
		if !allow {
			v = vDrop
			if p == policy.TCP {
				v = vReset
			}
		}
		if hasWhole(r.Prefixes, true) && hasWhole(r.Prefixes, false) {
			// Every address of both families (*): one rule for both.
			c.add(nrule{proto: p, dport: ports, verdict: v, comment: comment})
			continue
		}
		for _, fam := range []family{famIPv4, famIPv6} {
			var daddr []netip.Prefix
			whole, some := false, false
			for _, pf := range r.Prefixes {
				if (fam == famIPv4) != pf.Addr().Is4() {
					continue
				}
				if allow && !servedByTap(pf) {
					continue // the loopback and the egress network are decided before
				}
				some = true
				if pf.Bits() == 0 {
					whole = true
				}
				daddr = append(daddr, pf)
			}
			if !some {
				continue
			}
			if whole {
				daddr = nil
			} else {
				daddr = dedupPrefixes(daddr)
			}
			c.add(nrule{fam: fam, daddr: daddr, proto: p, dport: ports, verdict: v, comment: comment})
		}
	}
}

// hasWhole reports whether ps holds the whole IPv4 (v4) or IPv6 address space.
func hasWhole(ps []netip.Prefix, v4 bool) bool {
	for _, p := range ps {
		if p.Bits() == 0 && p.Addr().Is4() == v4 {
			return true
		}
	}
	return false
}

// servedByTap reports whether a destination prefix can leave by the tap
// interface: not when it lies in the loopback network or the egress network.
func servedByTap(p netip.Prefix) bool {
	switch {
	case p.Addr().Is4():
		return !(p.Bits() >= 8 && loopback4.Contains(p.Addr())) && !(p.Bits() >= egressNet.Bits() && egressNet.Contains(p.Addr()))
	default:
		return p != netip.PrefixFrom(netip.IPv6Loopback(), 128)
	}
}

// Egress reports whether some rule lets traffic leave the sandbox (or reach it
// from the host's loopback): Setup then starts an egress stack.
func (f *Filter) Egress() bool { return f.egress }

// Forwards returns the ports of the host's loopback forwarded into the sandbox
// (ALLOW IN rules on 127.0.0.1, localhost, 127.0.0.0/8 or 0.0.0.0), in protocol
// then port order.
func (f *Filter) Forwards() []Forward { return slices.Clone(f.forwards) }

// HostLoopback returns the ports of 127.0.0.1 that OUT rules let reach the
// host's loopback for protocol p (policy.TCP or policy.UDP), DENY rules' ports
// taken out, in order; nil when none. In the sandbox, 127.0.0.1 on these ports
// is redirected to the egress gateway, which the egress stack maps to the host's
// 127.0.0.1.
func (f *Filter) HostLoopback(p policy.Proto) []policy.PortRange {
	for pi, q := range protos {
		if q == p {
			return slices.Clone(f.loops[pi])
		}
	}
	return nil
}

// Warnings returns what the filter enforces differently from the letter of a rule
// without weakening it (addresses of a rule that the sandbox cannot reach while
// others of the same rule stay reachable), one message per rule, naming it.
func (f *Filter) Warnings() []string { return slices.Clone(f.warnings) }

// Hosts returns the content for the sandbox's /etc/hosts: every host name pinned
// by the policy with exactly its pinned addresses, and the loopback names.
func (f *Filter) Hosts() []byte {
	var b bytes.Buffer
	b.WriteString("# The sandbox's hosts file, written from the host names pinned by its policy.\n")
	names := make([]string, 0, len(f.pins))
	for name := range f.pins {
		if strings.ContainsAny(name, " \t\r\n#") || name == "" {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	_, has := f.pins["localhost"]
	if !has {
		b.WriteString("127.0.0.1\tlocalhost\n")
	}
	var v6names []string
	if !has {
		v6names = append(v6names, "localhost")
	}
	for _, n := range []string{"ip6-localhost", "ip6-loopback"} {
		if _, ok := f.pins[n]; !ok {
			v6names = append(v6names, n)
		}
	}
	if len(v6names) > 0 {
		b.WriteString("::1\t" + strings.Join(v6names, " ") + "\n")
	}
	for _, name := range names {
		for _, a := range f.pins[name] {
			fmt.Fprintf(&b, "%s\t%s\n", a, name)
		}
	}
	return b.Bytes()
}

// ResolvConf returns the content for the sandbox's /etc/resolv.conf, or nil when
// no traffic leaves the sandbox. The sandbox's only resolver is 10.0.2.3; when a
// DENY rule refuses DNS to it, the file names no resolver (the C library then asks
// the sandbox's own loopback, where nothing answers).
func (f *Filter) ResolvConf() []byte {
	if !f.egress {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("# The sandbox's resolver: the egress stack forwards its queries to the host's resolver.\n")
	switch {
	case f.dns[1]:
		fmt.Fprintf(&b, "nameserver %s\n", resolver)
	case f.dns[0]:
		fmt.Fprintf(&b, "nameserver %s\noptions use-vc\n", resolver)
	default:
		fmt.Fprintf(&b, "# No resolver: DNS is refused by %s: %s\n", f.dnsDeny[1].Ref, f.dnsDeny[1].Raw)
	}
	return b.Bytes()
}

// String returns the filter, human readable: the nftables table installed in the
// sandbox's network namespace (nft syntax), the egress stack and the forwards.
func (f *Filter) String() string {
	var b strings.Builder
	if !f.egress {
		b.WriteString("# loopback only: no net= rule lets traffic leave the sandbox (no interface but lo, no filter needed)\n")
		return b.String()
	}
	loop := "off (--disable-host-loopback)"
	if f.hostLoop {
		loop = "on, reached only through the nat_output redirections"
	}
	fmt.Fprintf(&b, "# egress: slirp4netns, %s %s/%d, gateway %s, resolver %s; host loopback %s\n",
		TapName, sandboxAddr, egressNet.Bits(), gateway, resolver, loop)
	for _, fw := range f.forwards {
		fmt.Fprintf(&b, "# forward: %s 127.0.0.1:%d on the host -> 127.0.0.1:%d in the sandbox (%s)\n", fw.Proto, fw.Port, fw.Port, fw.Rule.Ref)
	}
	f.rs.text(&b)
	return b.String()
}
