package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// netFormat is the reminder appended to a net= line that does not have five fields.
const netFormat = "net=ALLOW|DENY|tcp,udp|network|ports|IN,OUT"

// Action is what a net= rule does with the traffic it matches.
type Action uint8

const (
	// Allow lets the matching traffic through (net=ALLOW|...), unless a Deny rule
	// also matches it.
	Allow Action = iota + 1
	// Deny refuses the matching traffic (net=DENY|...), whatever the Allow rules say
	// and whatever the order of the lines.
	Deny
)

// String returns "ALLOW" or "DENY", as written in a rule.
func (a Action) String() string {
	switch a {
	case Allow:
		return "ALLOW"
	case Deny:
		return "DENY"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Proto is a set of transport protocols. A rule holds a set (TCP, UDP or
// AnyProto); a query names exactly one protocol (TCP or UDP).
type Proto uint8

const (
	// TCP is stream traffic (SOCK_STREAM over IPv4 or IPv6).
	TCP Proto = 1 << iota
	// UDP is datagram traffic (SOCK_DGRAM over IPv4 or IPv6).
	UDP
	// AnyProto is both TCP and UDP: a rule written with "*", "any" or "tcp,udp".
	AnyProto = TCP | UDP
)

// String returns "tcp", "udp", "tcp,udp" (AnyProto) or "none" (the empty set).
func (p Proto) String() string {
	switch p {
	case 0:
		return "none"
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case AnyProto:
		return "tcp,udp"
	}
	return "Proto(" + strconv.Itoa(int(p)) + ")"
}

// Direction is a set of traffic directions. A rule holds a set (In, Out or Both); a
// query names exactly one direction (In or Out).
type Direction uint8

const (
	// In is the server side: bind, listen and accept. The network of an In rule is
	// the LOCAL address the socket binds to (0.0.0.0 or :: for the wildcard).
	In Direction = 1 << iota
	// Out is the client side: connect, sendto and sendmsg. The network of an Out
	// rule is the REMOTE address.
	Out
	// Both is In and Out: a rule written with "*" or "IN,OUT".
	Both = In | Out
)

// String returns "IN", "OUT", "IN,OUT" (Both) or "none" (the empty set).
func (d Direction) String() string {
	switch d {
	case 0:
		return "none"
	case In:
		return "IN"
	case Out:
		return "OUT"
	case Both:
		return "IN,OUT"
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}

// PortRange is an inclusive range of ports, Lo <= Hi. A single port N is {N, N};
// "*" is {0, 65535}; an open range "N-" is {N, 65535}. Port 0 stands for an
// ephemeral bind (bind to port 0) and is matched like any other port.
type PortRange struct{ Lo, Hi uint16 }

// Contains reports whether port lies in the range.
func (r PortRange) Contains(port uint16) bool { return r.Lo <= port && port <= r.Hi }

// String returns "N" for a single port and "N-M" for a range.
func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return strconv.Itoa(int(r.Lo)) + "-" + strconv.Itoa(int(r.Hi))
}

// NetRule is one validated net=ACTION|PROTO|NETWORK|PORTS|DIRECTION rule. The
// embedded Rule gives its provenance and text (String returns the line as written,
// as refusal messages quote it).
//
// A NetRule returned by a Network shares its slices with the policy: do not modify
// them.
type NetRule struct {
	Rule
	// Action is Allow or Deny.
	Action Action
	// Protos is the set of protocols the rule covers (never empty).
	Protos Proto
	// Network is the NETWORK field as written (after ${VAR} substitution, spaces
	// trimmed): an address, a CIDR, a host name or "*".
	Network string
	// Host is the host name when NETWORK is one, lower-case and without a trailing
	// dot: the key of the rule's addresses in the pin table. "" otherwise.
	Host string
	// Any reports that NETWORK is "*": every IPv4 and IPv6 address.
	Any bool
	// Prefixes are the addresses the rule covers, masked (host bits cleared):
	//   - an address: one /32 or /128 prefix;
	//   - a CIDR: that prefix (written with host bits or not);
	//   - a host name: one /32 or /128 per address it resolved to at load time, in
	//     the order of the answer;
	//   - "*": 0.0.0.0/0 and ::/0.
	// IPv4-mapped IPv6 networks (::ffff:a.b.c.d/n, n >= 96) are stored as the IPv4
	// prefix they map, so every prefix is either plain IPv4 or non-mapped IPv6.
	Prefixes []netip.Prefix
	// Ports are the port ranges in the order written. Empty means the PORTS field
	// was empty: the rule matches no port at all (a warning says so at load).
	Ports []PortRange
	// Dir is the set of directions the rule covers (never empty).
	Dir Direction
}

// Matches reports whether the rule covers one socket operation, whatever its
// Action: proto must be TCP or UDP and dir In or Out (a zero or combined value
// never matches); ip is the local address for In (bind, listen) and the remote
// address for Out (connect, sendto, sendmsg); port is the port of that address.
// An IPv4-mapped IPv6 ip is judged as the IPv4 address it maps, and an IPv6 zone is
// ignored. An invalid ip never matches.
func (r *NetRule) Matches(proto Proto, ip netip.Addr, port uint16, dir Direction) bool {
	return r.matches(proto, canonAddr(ip), port, dir)
}

// matches is Matches for an address already passed through canonAddr.
func (r *NetRule) matches(proto Proto, ip netip.Addr, port uint16, dir Direction) bool {
	if (proto != TCP && proto != UDP) || r.Protos&proto == 0 {
		return false
	}
	if (dir != In && dir != Out) || r.Dir&dir == 0 {
		return false
	}
	if !ip.IsValid() {
		return false
	}
	inPorts := false
	for _, pr := range r.Ports {
		if pr.Contains(port) {
			inPorts = true
			break
		}
	}
	if !inPorts {
		return false
	}
	for _, p := range r.Prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// canonAddr drops the zone and turns an IPv4-mapped IPv6 address into IPv4.
func canonAddr(ip netip.Addr) netip.Addr { return ip.WithZone("").Unmap() }

// canonPrefix masks p and turns an IPv4-mapped IPv6 prefix of at least 96 bits into
// the IPv4 prefix it maps.
func canonPrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// Network is the net= part of a policy: the rules in load order and the pin table
// of the host names they name. The zero value (no rule) denies everything. A
// Network is immutable and safe for concurrent use.
type Network struct {
	rules []NetRule
	pins  map[string][]netip.Addr
	// declared reports that the policy has at least one net= line, even if every
	// such line was dropped because its host name did not resolve.
	declared bool
}

// Network returns the net= rules of the policy and their pin table. It is never
// nil: a policy without net= rules returns an empty Network, which denies all
// traffic (see Empty).
func (p *Policy) Network() *Network {
	if p == nil || p.net == nil {
		return &Network{}
	}
	return p.net
}

// Rules returns the net= rules in load order (rules given by code or on the command
// line first, then the files, includes spliced in place). ALLOW rules dropped at load
// because their host name did not resolve are not included.
func (n *Network) Rules() []NetRule {
	if n == nil {
		return nil
	}
	return slices.Clone(n.rules)
}

// Empty reports whether the policy has no net= line at all. A policy whose net=
// rules were all dropped (ALLOW rules naming host names that do not resolve) is
// not empty: it denies all traffic, and an OS provider must enforce that rather
// than leave the network unfiltered as it may do for an empty Network.
func (n *Network) Empty() bool { return n == nil || !n.declared && len(n.rules) == 0 }

// Pins returns a copy of the pin table: every host name named by a net= rule that
// resolved at load (lower-case, without a trailing dot) mapped to its addresses, in
// the order of the answer, without duplicates, IPv4-mapped addresses turned into
// IPv4. The OS providers write these names into the sandbox's hosts file and
// firewall, and the Python layer answers getaddrinfo with them, so that every layer
// judges the same addresses.
func (n *Network) Pins() map[string][]netip.Addr {
	out := make(map[string][]netip.Addr, 0)
	if n == nil {
		return out
	}
	for k, v := range n.pins {
		out[k] = slices.Clone(v)
	}
	return out
}

// Pin returns a copy of the addresses pinned for host (matched case-insensitively,
// a trailing dot ignored), and false when host is not pinned.
func (n *Network) Pin(host string) ([]netip.Addr, bool) {
	if n == nil {
		return nil, false
	}
	a, ok := n.pins[hostKey(host)]
	return slices.Clone(a), ok
}

// Allowed decides one socket operation (see NetRule.Matches for the arguments).
// Every DENY rule is checked first: the first one that matches refuses the
// operation and is returned ("DENIED by explicit rule"), whatever the order of the
// lines. Then the first ALLOW rule that matches allows it and is returned. When no
// rule matches, Allowed returns false and nil ("DENIED by implicit default policy").
// The returned rule belongs to the Network: do not modify it.
func (n *Network) Allowed(proto Proto, ip netip.Addr, port uint16, dir Direction) (bool, *NetRule) {
	if n == nil {
		return false, nil
	}
	ip = canonAddr(ip)
	for i := range n.rules {
		if r := &n.rules[i]; r.Action == Deny && r.matches(proto, ip, port, dir) {
			return false, r
		}
	}
	for i := range n.rules {
		if r := &n.rules[i]; r.Action == Allow && r.matches(proto, ip, port, dir) {
			return true, r
		}
	}
	return false, nil
}

// AllowedHost decides one socket operation addressed to a host name. A pinned name
// is allowed only if EVERY address pinned for it is allowed: then AllowedHost returns
// true and the rule that allowed the first address. Otherwise it returns false and
// the rule that denied the first refused address, or nil when that address fell to
// the default deny. host is matched case-insensitively, a trailing dot ignored; an
// IP address literal is judged by Allowed. A name that is not pinned is not judged:
// AllowedHost returns false and nil, and a caller that lets such a name resolve must
// check each address it gets with Allowed.
func (n *Network) AllowedHost(proto Proto, host string, port uint16, dir Direction) (bool, *NetRule) {
	if n == nil {
		return false, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return n.Allowed(proto, ip, port, dir)
	}
	addrs, ok := n.pins[hostKey(host)]
	if !ok || len(addrs) == 0 {
		return false, nil
	}
	var first *NetRule
	for i, ip := range addrs {
		ok, r := n.Allowed(proto, ip, port, dir)
		if !ok {
			return false, r
		}
		if i == 0 {
			first = r
		}
	}
	return true, first
}

// Protocols returns the protocols that at least one ALLOW rule opens (an ALLOW rule
// with an empty PORTS field opens nothing). DENY rules are not subtracted: the
// result tells a provider which protocols it must let through its filter at all.
func (n *Network) Protocols() Proto {
	var p Proto
	if n == nil {
		return p
	}
	for _, r := range n.rules {
		if r.Action == Allow && len(r.Ports) > 0 {
			p |= r.Protos
		}
	}
	return p
}

// netChunk is the number of rules per block of netLoad.chunks.
const netChunk = 4096

// netLoad is the net= loading state. The zero value is ready to use.
type netLoad struct {
	// chunks hold the rules in load order, in blocks of netChunk, so that a profile
	// of many rules is not copied over and over as one slice grows.
	chunks   [][]NetRule
	count    int
	pins     map[string][]netip.Addr
	declared bool
	dns      dnsState
}

// netRule validates one net= line, resolves its host name and keeps it.
func (ld *loader) netRule(r Rule) {
	st := &ld.netState
	nr, ok := ld.parseNetRule(r)
	if !ok {
		return
	}
	st.declared = true
	if nr.Host != "" && !ld.opts.noResolve {
		addrs, err := ld.resolveHost(r, nr.Network)
		if err != nil {
			if isCanceled(ld.ctx, err) {
				ld.errs.addErr(r.Ref, err, "Invalid rule '%s': resolving host name '%s' was interrupted: %v", r.Raw, nr.Host, err)
				return
			}
			if nr.Action == Deny {
				ld.errs.addErr(r.Ref, err, "Invalid rule '%s': cannot resolve host name '%s' of a DENY rule: %v", r.Raw, nr.Host, err)
				return
			}
			ld.warn(r.Ref, "Rule '%s' dropped: cannot resolve host name '%s': %v (its traffic stays denied)", r.Raw, nr.Host, err)
			return
		}
		nr.Prefixes = make([]netip.Prefix, len(addrs))
		for i, a := range addrs {
			nr.Prefixes[i] = netip.PrefixFrom(a, a.BitLen())
		}
		if st.pins == nil {
			st.pins = map[string][]netip.Addr{}
		}
		pinned := st.pins[nr.Host]
		for _, a := range addrs {
			if !slices.Contains(pinned, a) {
				pinned = append(pinned, a)
			}
		}
		st.pins[nr.Host] = pinned
	}
	if len(nr.Ports) == 0 {
		ld.warn(r.Ref, "Rule '%s' allows no port (empty PORTS field): it can never match", r.Raw)
	}
	if len(st.chunks) == 0 || len(st.chunks[len(st.chunks)-1]) == netChunk {
		st.chunks = append(st.chunks, make([]NetRule, 0, netChunk))
	}
	last := &st.chunks[len(st.chunks)-1]
	*last = append(*last, nr)
	st.count++
	ld.record(r)
}

// finishNet publishes the Network.
func (ld *loader) finishNet() {
	st := &ld.netState
	rules := make([]NetRule, 0, st.count)
	for _, c := range st.chunks {
		rules = append(rules, c...)
	}
	st.chunks = nil
	ld.p.net = &Network{rules: rules, pins: st.pins, declared: st.declared}
	if ld.p.net.pins == nil {
		ld.p.net.pins = map[string][]netip.Addr{}
	}
}

// parseNetRule checks the grammar of a net= value. Every invalid field is reported;
// ok is false when any is. The host name, if any, is not resolved yet.
func (ld *loader) parseNetRule(r Rule) (NetRule, bool) {
	fields := strings.Split(r.Value, "|")
	if len(fields) != 5 {
		ld.errs.add(r.Ref, "Invalid rule '%s': has incorrect number of parts separated by '|'. Expected 5, got %d. Format: %s",
			r.Raw, len(fields), netFormat)
		return NetRule{}, false
	}
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	nr := NetRule{Rule: r, Network: fields[2]}
	ok := true
	fail := func(format string, args ...any) {
		ld.errs.add(r.Ref, "Invalid rule '%s': %s", r.Raw, fmt.Sprintf(format, args...))
		ok = false
	}

	switch fields[0] {
	case "ALLOW":
		nr.Action = Allow
	case "DENY":
		nr.Action = Deny
	default:
		fail("invalid action '%s': use ALLOW or DENY (upper case)", fields[0])
	}

	var msg string
	if nr.Protos, msg = parseProtos(fields[1]); msg != "" {
		fail("%s", msg)
	}
	if msg = parseNetwork(&nr); msg != "" {
		fail("%s", msg)
	}
	if nr.Ports, msg = parsePorts(fields[3]); msg != "" {
		fail("%s", msg)
	}
	if nr.Dir, msg = parseDirection(fields[4]); msg != "" {
		fail("%s", msg)
	}
	return nr, ok
}

// parseProtos parses the PROTO field; msg is "" when it is valid.
func parseProtos(s string) (Proto, string) {
	const use = "use tcp, udp, tcp,udp or * (or any)"
	if s == "" {
		return 0, "protocol must be set: " + use
	}
	var p Proto
	star := false
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		n++
		part = strings.TrimSpace(part)
		switch strings.ToLower(part) {
		case "tcp":
			p |= TCP
		case "udp":
			p |= UDP
		case "*", "any":
			star = true
			p = AnyProto
		default:
			return 0, fmt.Sprintf("invalid protocol '%s' in '%s': %s", part, s, use)
		}
	}
	if star && n > 1 {
		return 0, fmt.Sprintf("invalid protocol list '%s': '*' (any protocol) cannot be combined with other protocols", s)
	}
	return p, ""
}

// parseDirection parses the DIRECTION field; msg is "" when it is valid.
func parseDirection(s string) (Direction, string) {
	const use = "use IN, OUT, IN,OUT or * (upper case)"
	if s == "" {
		return 0, "direction must be set: " + use
	}
	if s == "*" {
		return Both, ""
	}
	var d Direction
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		switch part {
		case "IN":
			d |= In
		case "OUT":
			d |= Out
		case "*":
			return 0, fmt.Sprintf("invalid direction list '%s': '*' (both directions) cannot be combined with IN or OUT", s)
		default:
			return 0, fmt.Sprintf("invalid direction '%s' in '%s': %s", part, s, use)
		}
	}
	return d, ""
}

// parsePorts parses the PORTS field; msg is "" when it is valid. An empty field is
// valid and yields no range.
func parsePorts(s string) ([]PortRange, string) {
	if s == "" {
		return nil, ""
	}
	const use = "use *, a port, a range N-M or an open range N- (ports 0 to 65535)"
	n := strings.Count(s, ",") + 1
	out := make([]PortRange, 0, n)
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "*" {
			out = append(out, PortRange{0, 65535})
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		lo, hi = strings.TrimSpace(lo), strings.TrimSpace(hi)
		a, okA := parsePort(lo)
		if !isRange {
			if !okA {
				return nil, fmt.Sprintf("invalid port '%s' in '%s': %s", part, s, use)
			}
			out = append(out, PortRange{a, a})
			continue
		}
		b, okB := uint16(65535), true
		if hi != "" {
			b, okB = parsePort(hi)
		}
		if !okA || !okB {
			return nil, fmt.Sprintf("invalid port range '%s' in '%s': %s", part, s, use)
		}
		if a > b {
			return nil, fmt.Sprintf("invalid port range '%s' in '%s': the start is greater than the end", part, s)
		}
		out = append(out, PortRange{a, b})
	}
	return out, ""
}

// parsePort parses a decimal port from 0 to 65535 (digits only, leading zeros allowed).
func parsePort(s string) (uint16, bool) {
	if s == "" {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
		if v > 65535 {
			return 0, false
		}
	}
	return uint16(v), true
}

// parseNetwork parses nr.Network into Any/Prefixes or Host; msg is "" when it is
// valid.
func parseNetwork(nr *NetRule) string {
	s := nr.Network
	const use = "use an IP address, a CIDR, a host name or *"
	switch {
	case s == "":
		return "network must be set: " + use
	case s == "*":
		nr.Any = true
		nr.Prefixes = []netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0), netip.PrefixFrom(netip.IPv6Unspecified(), 0)}
		return ""
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Sprintf("invalid network '%s': not a valid CIDR (%s)", s, prefixReason(s, err))
		}
		nr.Prefixes = []netip.Prefix{canonPrefix(p)}
		return ""
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return fmt.Sprintf("invalid network '%s': an IPv6 zone is not allowed in a rule", s)
		}
		a = a.Unmap()
		nr.Prefixes = []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
		return ""
	}
	switch {
	case strings.Contains(s, ":"):
		return fmt.Sprintf("invalid network '%s': not a valid IPv6 address; %s", s, use)
	case strings.Trim(s, "0123456789.") == "":
		return fmt.Sprintf("invalid network '%s': not a valid IPv4 address; %s", s, use)
	case !validHostName(s):
		return fmt.Sprintf("invalid network '%s': not a valid host name; %s", s, use)
	}
	nr.Host = hostKey(s)
	return ""
}

// prefixReason shortens the netip.ParsePrefix error for s to its reason, e.g.
// "prefix length out of range" or "IPv4 field has value >255".
func prefixReason(s string, err error) string {
	msg := strings.TrimPrefix(err.Error(), "netip.ParsePrefix("+strconv.Quote(s)+"): ")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		msg = strings.TrimPrefix(msg, "ParseAddr("+strconv.Quote(s[:i])+"): ")
	}
	return msg
}
