package policy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNetGrammarErrors(t *testing.T) {
	const (
		protoUse = "use tcp, udp, tcp,udp or * (or any)"
		netUse   = "use an IP address, a CIDR, a host name or *"
		portUse  = "use *, a port, a range N-M or an open range N- (ports 0 to 65535)"
		dirUse   = "use IN, OUT, IN,OUT or * (upper case)"
	)
	tests := []struct {
		value string
		msgs  []string // messages after "Invalid rule '<raw>': "
	}{
		// Number of fields.
		{"ALLOW|tcp|1.2.3.4|80", []string{"has incorrect number of parts separated by '|'. Expected 5, got 4. Format: net=ALLOW|DENY|tcp,udp|network|ports|IN,OUT"}},
		{"ALLOW|tcp|1.2.3.4|80|OUT|x", []string{"has incorrect number of parts separated by '|'. Expected 5, got 6. Format: net=ALLOW|DENY|tcp,udp|network|ports|IN,OUT"}},
		{"", []string{"has incorrect number of parts separated by '|'. Expected 5, got 1. Format: net=ALLOW|DENY|tcp,udp|network|ports|IN,OUT"}},
		{"ALLOW tcp 1.2.3.4 80 OUT", []string{"has incorrect number of parts separated by '|'. Expected 5, got 1. Format: net=ALLOW|DENY|tcp,udp|network|ports|IN,OUT"}},
		// ACTION.
		{"allow|tcp|1.2.3.4|80|OUT", []string{"invalid action 'allow': use ALLOW or DENY (upper case)"}},
		{"PERMIT|tcp|1.2.3.4|80|OUT", []string{"invalid action 'PERMIT': use ALLOW or DENY (upper case)"}},
		{"|tcp|1.2.3.4|80|OUT", []string{"invalid action '': use ALLOW or DENY (upper case)"}},
		// PROTO.
		{"ALLOW||1.2.3.4|80|OUT", []string{"protocol must be set: " + protoUse}},
		{"ALLOW|icmp|1.2.3.4|80|OUT", []string{"invalid protocol 'icmp' in 'icmp': " + protoUse}},
		{"ALLOW|tcp,|1.2.3.4|80|OUT", []string{"invalid protocol '' in 'tcp,': " + protoUse}},
		{"ALLOW|tcp,*|1.2.3.4|80|OUT", []string{"invalid protocol list 'tcp,*': '*' (any protocol) cannot be combined with other protocols"}},
		{"ALLOW|any,udp|1.2.3.4|80|OUT", []string{"invalid protocol list 'any,udp': '*' (any protocol) cannot be combined with other protocols"}},
		// NETWORK.
		{"ALLOW|tcp||80|OUT", []string{"network must be set: " + netUse}},
		{"ALLOW|tcp|10.0.0.0/33|80|OUT", []string{"invalid network '10.0.0.0/33': not a valid CIDR (prefix length out of range)"}},
		{"ALLOW|tcp|10.0.0.256/8|80|OUT", []string{"invalid network '10.0.0.256/8': not a valid CIDR (IPv4 field has value >255)"}},
		{"ALLOW|tcp|::1/129|80|OUT", []string{"invalid network '::1/129': not a valid CIDR (prefix length out of range)"}},
		{"ALLOW|tcp|10.0.0.0/|80|OUT", []string{`invalid network '10.0.0.0/': not a valid CIDR (bad bits after slash: "")`}},
		{"ALLOW|tcp|10.0.0.256|80|OUT", []string{"invalid network '10.0.0.256': not a valid IPv4 address; " + netUse}},
		{"ALLOW|tcp|1.2.3|80|OUT", []string{"invalid network '1.2.3': not a valid IPv4 address; " + netUse}},
		{"ALLOW|tcp|2001:db8::g|80|OUT", []string{"invalid network '2001:db8::g': not a valid IPv6 address; " + netUse}},
		{"ALLOW|tcp|[::1]|80|OUT", []string{"invalid network '[::1]': not a valid IPv6 address; " + netUse}},
		{"ALLOW|tcp|fe80::1%eth0|80|OUT", []string{"invalid network 'fe80::1%eth0': an IPv6 zone is not allowed in a rule"}},
		{"ALLOW|tcp|-bad.example|80|OUT", []string{"invalid network '-bad.example': not a valid host name; " + netUse}},
		{"ALLOW|tcp|exa_mple.com|80|OUT", []string{"invalid network 'exa_mple.com': not a valid host name; " + netUse}},
		{"ALLOW|tcp|*.example.com|80|OUT", []string{"invalid network '*.example.com': not a valid host name; " + netUse}},
		{"ALLOW|tcp|a..b|80|OUT", []string{"invalid network 'a..b': not a valid host name; " + netUse}},
		{"ALLOW|tcp|" + strings.Repeat("a", 64) + ".test|80|OUT", []string{"invalid network '" + strings.Repeat("a", 64) + ".test': not a valid host name; " + netUse}},
		// PORTS.
		{"ALLOW|tcp|1.2.3.4|65536|OUT", []string{"invalid port '65536' in '65536': " + portUse}},
		{"ALLOW|tcp|1.2.3.4|http|OUT", []string{"invalid port 'http' in 'http': " + portUse}},
		{"ALLOW|tcp|1.2.3.4|+80|OUT", []string{"invalid port '+80' in '+80': " + portUse}},
		{"ALLOW|tcp|1.2.3.4|80,,443|OUT", []string{"invalid port '' in '80,,443': " + portUse}},
		{"ALLOW|tcp|1.2.3.4|80-70|OUT", []string{"invalid port range '80-70' in '80-70': the start is greater than the end"}},
		{"ALLOW|tcp|1.2.3.4|-80|OUT", []string{"invalid port range '-80' in '-80': " + portUse}},
		{"ALLOW|tcp|1.2.3.4|1-2-3|OUT", []string{"invalid port range '1-2-3' in '1-2-3': " + portUse}},
		{"ALLOW|tcp|1.2.3.4|443,70000-|OUT", []string{"invalid port range '70000-' in '443,70000-': " + portUse}},
		// DIRECTION.
		{"ALLOW|tcp|1.2.3.4|80|", []string{"direction must be set: " + dirUse}},
		{"ALLOW|tcp|1.2.3.4|80|in", []string{"invalid direction 'in' in 'in': " + dirUse}},
		{"ALLOW|tcp|1.2.3.4|80|IN,out", []string{"invalid direction 'out' in 'IN,out': " + dirUse}},
		{"ALLOW|tcp|1.2.3.4|80|IN,*", []string{"invalid direction list 'IN,*': '*' (both directions) cannot be combined with IN or OUT"}},
		{"ALLOW|tcp|1.2.3.4|80|UP", []string{"invalid direction 'UP' in 'UP': " + dirUse}},
		// Every bad field of a line is reported.
		{"allow|icmp|1.2.3.4|80|sideways", []string{
			"invalid action 'allow': use ALLOW or DENY (upper case)",
			"invalid protocol 'icmp' in 'icmp': " + protoUse,
			"invalid direction 'sideways' in 'sideways': " + dirUse,
		}},
	}
	e := newNetEnv(t, "", nil)
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			raw := "net=" + tt.value
			_, err := e.parse(context.Background(), "expose-ro=.\n"+raw+"\n")
			want := Headline
			for _, m := range tt.msgs {
				want += "\n.py-sandboxes(2): Invalid rule '" + raw + "': " + m
			}
			checkErr(t, err, want)
		})
	}
	if n := e.dns.total(); n != 0 {
		t.Errorf("invalid rules sent %d DNS queries", n)
	}
}

func TestNetErrorsAcrossLines(t *testing.T) {
	e := newNetEnv(t, "", nil)
	o := e.opts()
	o.Rules = []string{"net=ALLOW|tcp|1.2.3.4|80|out"}
	text := `net=ALLOW|tcp|1.2.3.4|80|OUT
net=ALLOW|TCP|1.2.3.4|80

# comment
net=DENY|*|10.0.0.0/8|*|OUT
net=ALLOW|tcp|1.2.3.4|99999|OUT
`
	_, err := Parse(context.Background(), e.dir+"/"+DefaultName, []byte(text), o)
	checkErr(t, err, Headline+`
<arg>: Invalid rule 'net=ALLOW|tcp|1.2.3.4|80|out': invalid direction 'out' in 'out': use IN, OUT, IN,OUT or * (upper case)
.py-sandboxes(2): Invalid rule 'net=ALLOW|TCP|1.2.3.4|80': has incorrect number of parts separated by '|'. Expected 5, got 4. Format: net=ALLOW|DENY|tcp,udp|network|ports|IN,OUT
.py-sandboxes(6): Invalid rule 'net=ALLOW|tcp|1.2.3.4|99999|OUT': invalid port '99999' in '99999': use *, a port, a range N-M or an open range N- (ports 0 to 65535)`)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Ref.Line != 0 || !ce.Ref.IsArg() {
		t.Errorf("first error %+v, want the <arg> rule", ce)
	}
}

// netForm is the parsed content of a rule, without its provenance.
type netForm struct {
	Action   Action
	Protos   Proto
	Network  string
	Host     string
	Any      bool
	Prefixes []netip.Prefix
	Ports    []PortRange
	Dir      Direction
}

func formOf(r NetRule) netForm {
	return netForm{r.Action, r.Protos, r.Network, r.Host, r.Any, r.Prefixes, r.Ports, r.Dir}
}

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func TestNetForms(t *testing.T) {
	all := []PortRange{{0, 65535}}
	tests := []struct {
		value string
		want  netForm
	}{
		{"ALLOW|tcp|1.2.3.4|80|OUT", netForm{Allow, TCP, "1.2.3.4", "", false, pfx("1.2.3.4/32"), []PortRange{{80, 80}}, Out}},
		{"DENY|UDP|10.0.0.0/8|*|IN", netForm{Deny, UDP, "10.0.0.0/8", "", false, pfx("10.0.0.0/8"), all, In}},
		{"ALLOW|Tcp,UDP|10.1.2.3/8|1000-2000,3000-,22|IN,OUT", netForm{Allow, AnyProto, "10.1.2.3/8", "", false, pfx("10.0.0.0/8"),
			[]PortRange{{1000, 2000}, {3000, 65535}, {22, 22}}, Both}},
		{"ALLOW|*|2001:db8::1/32|443|*", netForm{Allow, AnyProto, "2001:db8::1/32", "", false, pfx("2001:db8::/32"), []PortRange{{443, 443}}, Both}},
		{"ALLOW|any|::1|0|OUT,IN", netForm{Allow, AnyProto, "::1", "", false, pfx("::1/128"), []PortRange{{0, 0}}, Both}},
		{"ALLOW|ANY|*|53|*", netForm{Allow, AnyProto, "*", "", true, pfx("0.0.0.0/0", "::/0"), []PortRange{{53, 53}}, Both}},
		{"ALLOW|udp,tcp,udp|0.0.0.0/0|53|OUT,OUT", netForm{Allow, AnyProto, "0.0.0.0/0", "", false, pfx("0.0.0.0/0"), []PortRange{{53, 53}}, Out}},
		{"ALLOW|tcp|::/0|443|OUT", netForm{Allow, TCP, "::/0", "", false, pfx("::/0"), []PortRange{{443, 443}}, Out}},
		{"ALLOW|udp|::ffff:192.0.2.1|53|OUT", netForm{Allow, UDP, "::ffff:192.0.2.1", "", false, pfx("192.0.2.1/32"), []PortRange{{53, 53}}, Out}},
		{"ALLOW|udp|::ffff:10.9.8.7/104|53|OUT", netForm{Allow, UDP, "::ffff:10.9.8.7/104", "", false, pfx("10.0.0.0/8"), []PortRange{{53, 53}}, Out}},
		{"ALLOW|udp|::ffff:0:0/96|53|OUT", netForm{Allow, UDP, "::ffff:0:0/96", "", false, pfx("0.0.0.0/0"), []PortRange{{53, 53}}, Out}},
		{"ALLOW|udp|::ffff:0:0/80|53|OUT", netForm{Allow, UDP, "::ffff:0:0/80", "", false, pfx("::/80"), []PortRange{{53, 53}}, Out}},
		{"ALLOW | tcp | 1.2.3.4 | 80 , 443 | OUT", netForm{Allow, TCP, "1.2.3.4", "", false, pfx("1.2.3.4/32"), []PortRange{{80, 80}, {443, 443}}, Out}},
		{"ALLOW|tcp|1.2.3.4|080,5-5,65535-|OUT", netForm{Allow, TCP, "1.2.3.4", "", false, pfx("1.2.3.4/32"), []PortRange{{80, 80}, {5, 5}, {65535, 65535}}, Out}},
		{"ALLOW|tcp|1.2.3.4|*,80|OUT", netForm{Allow, TCP, "1.2.3.4", "", false, pfx("1.2.3.4/32"), []PortRange{{0, 65535}, {80, 80}}, Out}},
		{"ALLOW|tcp|1.2.3.4||OUT", netForm{Allow, TCP, "1.2.3.4", "", false, pfx("1.2.3.4/32"), nil, Out}},
		{"ALLOW|tcp|0.0.0.0/0|${PORT:-9000}|IN", netForm{Allow, TCP, "0.0.0.0/0", "", false, pfx("0.0.0.0/0"), []PortRange{{9000, 9000}}, In}},
		{"ALLOW|TCP|Ip6-Localhost|9999,0|IN", netForm{Allow, TCP, "Ip6-Localhost", "ip6-localhost", false, pfx("::1/128"), []PortRange{{9999, 9999}, {0, 0}}, In}},
	}
	e := newNetEnv(t, "", nil)
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			raw := "net=" + tt.value
			p := e.mustParse(t, raw)
			rules := p.Network().Rules()
			if len(rules) != 1 {
				t.Fatalf("%d rules, want 1", len(rules))
			}
			if diff := cmp.Diff(tt.want, formOf(rules[0]), prefixCmp); diff != "" {
				t.Errorf("rule (-want +got):\n%s", diff)
			}
			r := rules[0]
			if r.Raw != raw || r.String() != raw || r.Key != "net" || r.Ref.Line != 1 || r.Ref.Name != DefaultName {
				t.Errorf("provenance: %+v", r.Rule)
			}
		})
	}
}

// TestNetRecorded checks that each accepted net= rule is recorded once, in load
// order, and that a dropped rule is not.
func TestNetRecorded(t *testing.T) {
	e := newNetEnv(t, "", nil)
	p := e.mustParse(t, `net=ALLOW|tcp|1.2.3.4|80|OUT
net=ALLOW|tcp|nope.test|80|OUT
expose-ro=.
net=DENY|*|*|*|*
net=ALLOW|udp|localhost||OUT
`)
	var got []string
	for _, r := range p.Rules() {
		if r.Key == "net" {
			got = append(got, r.Raw)
		}
	}
	want := []string{"net=ALLOW|tcp|1.2.3.4|80|OUT", "net=DENY|*|*|*|*", "net=ALLOW|udp|localhost||OUT"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded net= rules (-want +got):\n%s", diff)
	}
	var kept []string
	for _, r := range p.Network().Rules() {
		kept = append(kept, r.Raw)
	}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("Network().Rules() (-want +got):\n%s", diff)
	}
}

func TestNetEmptyPorts(t *testing.T) {
	e := newNetEnv(t, "", nil)
	p := e.mustParse(t, "net=ALLOW|tcp|1.2.3.4|  |OUT\n")
	want := []string{".py-sandboxes(1): Rule 'net=ALLOW|tcp|1.2.3.4|  |OUT' allows no port (empty PORTS field): it can never match"}
	if diff := cmp.Diff(want, warnings(p)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	n := p.Network()
	if len(n.Rules()) != 1 || n.Empty() {
		t.Fatalf("the rule was not kept: %v", n.Rules())
	}
	for _, port := range []uint16{0, 1, 80, 65535} {
		if ok, r := n.Allowed(TCP, netip.MustParseAddr("1.2.3.4"), port, Out); ok || r != nil {
			t.Errorf("Allowed(port %d) = %v, %v", port, ok, r)
		}
	}
	if got := n.Protocols(); got != 0 {
		t.Errorf("Protocols() = %v, want none", got)
	}
}

// matchPolicy has ALLOW and DENY rules interleaved; line numbers matter to the tests.
var matchPolicy = []string{
	"net=ALLOW|tcp|0.0.0.0/0|443|OUT",                    // 1
	"net=ALLOW|*|10.0.0.0/8|*|OUT",                       // 2
	"net=DENY|*|10.255.0.0/16|*|OUT",                     // 3
	"net=ALLOW|udp|192.0.2.0/24|5000-5010,6000-|OUT",     // 4
	"net=ALLOW|tcp|2001:db8::/32|80|*",                   // 5
	"net=ALLOW|tcp|0.0.0.0|8000|IN",                      // 6
	"net=ALLOW|tcp|::|0|IN",                              // 7
	"net=DENY|tcp|192.0.2.66|*|*",                        // 8
	"net=ALLOW|tcp|fe80::/10|22|OUT",                     // 9
	"net=ALLOW|udp|::ffff:198.51.100.0/120|123|OUT",      // 10
	"net=DENY|udp|::ffff:198.51.100.128/121|123-124|OUT", // 11
}

type netQuery struct {
	proto Proto
	ip    string
	port  uint16
	dir   Direction
}

var matchTests = []struct {
	q    netQuery
	ok   bool
	line int // the deciding rule's line in matchPolicy, 0 for none
}{
	{netQuery{TCP, "1.1.1.1", 443, Out}, true, 1},
	{netQuery{TCP, "1.1.1.1", 80, Out}, false, 0},
	{netQuery{TCP, "1.1.1.1", 443, In}, false, 0},
	{netQuery{UDP, "1.1.1.1", 443, Out}, false, 0},
	{netQuery{UDP, "10.1.2.3", 9, Out}, true, 2},
	{netQuery{TCP, "10.255.1.1", 443, Out}, false, 3},
	{netQuery{UDP, "10.255.1.1", 53, Out}, false, 3},
	{netQuery{TCP, "::ffff:10.255.1.1", 443, Out}, false, 3},
	{netQuery{TCP, "::ffff:10.1.1.1", 22, Out}, true, 2},
	{netQuery{TCP, "10.255.1.1", 443, In}, false, 0},
	{netQuery{UDP, "192.0.2.1", 4999, Out}, false, 0},
	{netQuery{UDP, "192.0.2.1", 5000, Out}, true, 4},
	{netQuery{UDP, "192.0.2.1", 5010, Out}, true, 4},
	{netQuery{UDP, "192.0.2.1", 5011, Out}, false, 0},
	{netQuery{UDP, "192.0.2.1", 5999, Out}, false, 0},
	{netQuery{UDP, "192.0.2.1", 6000, Out}, true, 4},
	{netQuery{UDP, "192.0.2.1", 65535, Out}, true, 4},
	{netQuery{UDP, "192.0.3.1", 6000, Out}, false, 0},
	{netQuery{TCP, "192.0.2.66", 443, Out}, false, 8},
	{netQuery{TCP, "192.0.2.66", 443, In}, false, 8},
	{netQuery{UDP, "192.0.2.66", 5000, Out}, true, 4},
	{netQuery{TCP, "2001:db8::1", 80, Out}, true, 5},
	{netQuery{TCP, "2001:db8:ffff::1", 80, In}, true, 5},
	{netQuery{TCP, "2001:db9::1", 80, Out}, false, 0},
	{netQuery{UDP, "2001:db8::1", 80, Out}, false, 0},
	{netQuery{TCP, "0.0.0.0", 8000, In}, true, 6},
	{netQuery{TCP, "127.0.0.1", 8000, In}, false, 0},
	{netQuery{TCP, "0.0.0.0", 8000, Out}, false, 0},
	{netQuery{TCP, "::", 0, In}, true, 7},
	{netQuery{TCP, "::", 1, In}, false, 0},
	{netQuery{TCP, "::ffff:0.0.0.0", 8000, In}, true, 6},
	{netQuery{TCP, "fe80::1%eth0", 22, Out}, true, 9},
	{netQuery{UDP, "198.51.100.7", 123, Out}, true, 10},
	{netQuery{UDP, "::ffff:198.51.100.7", 123, Out}, true, 10},
	{netQuery{UDP, "198.51.100.200", 123, Out}, false, 11},
	{netQuery{UDP, "198.51.100.200", 125, Out}, false, 0},
	// A query names exactly one protocol and one direction.
	{netQuery{AnyProto, "1.1.1.1", 443, Out}, false, 0},
	{netQuery{0, "1.1.1.1", 443, Out}, false, 0},
	{netQuery{TCP, "1.1.1.1", 443, Both}, false, 0},
	{netQuery{TCP, "1.1.1.1", 443, 0}, false, 0},
}

func TestNetAllowed(t *testing.T) {
	e := newNetEnv(t, "", nil)
	p := e.mustParse(t, strings.Join(matchPolicy, "\n"))
	n := p.Network()
	if len(n.Rules()) != len(matchPolicy) {
		t.Fatalf("%d rules, want %d", len(n.Rules()), len(matchPolicy))
	}
	for _, tt := range matchTests {
		q := tt.q
		ok, r := n.Allowed(q.proto, netip.MustParseAddr(q.ip), q.port, q.dir)
		line := 0
		if r != nil {
			line = r.Ref.Line
			if r.Raw != matchPolicy[line-1] {
				t.Errorf("%v: rule %q does not come from line %d", q, r.Raw, line)
			}
		}
		if ok != tt.ok || line != tt.line {
			t.Errorf("Allowed(%v, %s, %d, %v) = %v, line %d; want %v, line %d", q.proto, q.ip, q.port, q.dir, ok, line, tt.ok, tt.line)
		}
	}
	if ok, r := n.Allowed(TCP, netip.Addr{}, 443, Out); ok || r != nil {
		t.Errorf("Allowed(invalid address) = %v, %v", ok, r)
	}
}

// TestNetDenyFirst checks that the decision does not depend on the order of the
// lines: every DENY rule is checked before any ALLOW rule.
func TestNetDenyFirst(t *testing.T) {
	e := newNetEnv(t, "", nil)
	reversed := make([]string, len(matchPolicy))
	for i, l := range matchPolicy {
		reversed[len(matchPolicy)-1-i] = l
	}
	fwd := e.mustParse(t, strings.Join(matchPolicy, "\n")).Network()
	rev := e.mustParse(t, strings.Join(reversed, "\n")).Network()
	raw := func(r *NetRule) string {
		if r == nil {
			return ""
		}
		return r.Raw
	}
	for _, tt := range matchTests {
		q := tt.q
		ok1, r1 := fwd.Allowed(q.proto, netip.MustParseAddr(q.ip), q.port, q.dir)
		ok2, r2 := rev.Allowed(q.proto, netip.MustParseAddr(q.ip), q.port, q.dir)
		if ok1 != ok2 || (!ok1 && raw(r1) != raw(r2)) {
			t.Errorf("%v: in order %v %q, reversed %v %q", q, ok1, raw(r1), ok2, raw(r2))
		}
	}
	// A DENY given by a later file (or line) beats an earlier ALLOW.
	n := e.mustParse(t, "net=ALLOW|*|*|*|*\nnet=DENY|tcp|10.0.0.0/8|22|OUT\n").Network()
	if ok, r := n.Allowed(TCP, netip.MustParseAddr("10.0.0.1"), 22, Out); ok || r == nil || r.Action != Deny {
		t.Errorf("Allowed = %v, %v; want the DENY rule", ok, r)
	}
	if ok, r := n.Allowed(TCP, netip.MustParseAddr("10.0.0.1"), 23, Out); !ok || r == nil || r.Network != "*" {
		t.Errorf("Allowed = %v, %v; want the ALLOW * rule", ok, r)
	}
}

func TestNetMatches(t *testing.T) {
	e := newNetEnv(t, "", nil)
	r := e.mustParse(t, "net=DENY|udp|::ffff:10.0.0.0/104|53,60-70|IN").Network().Rules()[0]
	tests := []struct {
		q    netQuery
		want bool
	}{
		{netQuery{UDP, "10.1.1.1", 53, In}, true},
		{netQuery{UDP, "::ffff:10.1.1.1", 65, In}, true},
		{netQuery{UDP, "10.1.1.1", 71, In}, false},
		{netQuery{TCP, "10.1.1.1", 53, In}, false},
		{netQuery{UDP, "10.1.1.1", 53, Out}, false},
		{netQuery{UDP, "11.1.1.1", 53, In}, false},
		{netQuery{UDP, "::a01:101", 53, In}, false}, // IPv4-compatible, not mapped
	}
	for _, tt := range tests {
		q := tt.q
		if got := r.Matches(q.proto, netip.MustParseAddr(q.ip), q.port, q.dir); got != tt.want {
			t.Errorf("Matches(%v, %s, %d, %v) = %v, want %v", q.proto, q.ip, q.port, q.dir, got, tt.want)
		}
	}
}

func TestNetAllowedHost(t *testing.T) {
	e := newNetEnv(t, "192.0.2.10 two.test\n192.0.2.11 two.test\n2001:db8::1 two.test\n", nil)
	rules := []string{
		"net=ALLOW|tcp|two.test|443|OUT",        // 1
		"net=ALLOW|tcp|192.0.2.10|80|OUT",       // 2
		"net=ALLOW|tcp|192.0.2.0/24|8080|OUT",   // 3
		"net=ALLOW|tcp|2001:db8::/32|8080|OUT",  // 4
		"net=DENY|tcp|192.0.2.11|8080-8081|OUT", // 5
		"net=ALLOW|tcp|192.0.2.0/24|9000|OUT",   // 6
		"net=ALLOW|tcp|2001:db8::/32|9000|OUT",  // 7
		"net=DENY|udp|two.test|*|OUT",           // 8
	}
	n := e.mustParse(t, strings.Join(rules, "\n")).Network()
	tests := []struct {
		proto Proto
		host  string
		port  uint16
		dir   Direction
		ok    bool
		line  int
	}{
		{TCP, "two.test", 443, Out, true, 1},
		{TCP, "TWO.Test.", 443, Out, true, 1},
		{TCP, "two.test", 443, In, false, 0},
		{TCP, "two.test", 80, Out, false, 0},   // only 192.0.2.10 is allowed
		{TCP, "two.test", 8080, Out, false, 5}, // 192.0.2.11 is denied
		{TCP, "two.test", 9000, Out, true, 6},  // every address allowed
		{UDP, "two.test", 53, Out, false, 8},
		{TCP, "other.test", 443, Out, false, 0}, // not pinned
		{TCP, "192.0.2.10", 80, Out, true, 2},   // literal
		{TCP, "::ffff:192.0.2.11", 8080, Out, false, 5},
	}
	for _, tt := range tests {
		ok, r := n.AllowedHost(tt.proto, tt.host, tt.port, tt.dir)
		line := 0
		if r != nil {
			line = r.Ref.Line
		}
		if ok != tt.ok || line != tt.line {
			t.Errorf("AllowedHost(%v, %q, %d, %v) = %v, line %d; want %v, line %d", tt.proto, tt.host, tt.port, tt.dir, ok, line, tt.ok, tt.line)
		}
	}
	want := map[string][]netip.Addr{"two.test": addrs("192.0.2.10", "192.0.2.11", "2001:db8::1")}
	if diff := cmp.Diff(want, n.Pins(), addrCmp); diff != "" {
		t.Errorf("Pins() (-want +got):\n%s", diff)
	}
}

func TestNetNoRule(t *testing.T) {
	e := newNetEnv(t, "", nil)
	for _, p := range []*Policy{e.mustParse(t, "expose-ro=.\n"), {}} {
		n := p.Network()
		if n == nil {
			t.Fatal("Network() = nil")
		}
		if !n.Empty() || len(n.Rules()) != 0 || n.Protocols() != 0 {
			t.Errorf("Empty() = %v, Rules() = %v, Protocols() = %v", n.Empty(), n.Rules(), n.Protocols())
		}
		if pins := n.Pins(); pins == nil || len(pins) != 0 {
			t.Errorf("Pins() = %#v, want an empty map", pins)
		}
		if ok, r := n.Allowed(TCP, netip.MustParseAddr("127.0.0.1"), 80, Out); ok || r != nil {
			t.Errorf("Allowed = %v, %v: want the default deny", ok, r)
		}
		if ok, r := n.AllowedHost(TCP, "localhost", 80, Out); ok || r != nil {
			t.Errorf("AllowedHost = %v, %v: want the default deny", ok, r)
		}
	}
	if e.mustParse(t, "net=DENY|*|*|*|*").Network().Empty() {
		t.Error("Empty() = true with a rule")
	}
}

func TestNetProtocols(t *testing.T) {
	e := newNetEnv(t, "", nil)
	tests := []struct {
		rules string
		want  Proto
	}{
		{"net=DENY|*|*|*|*", 0},
		{"net=ALLOW|udp|*|53|OUT\nnet=DENY|tcp|*|*|*", UDP},
		{"net=ALLOW|tcp|*|443|OUT\nnet=ALLOW|udp|*||OUT", TCP},
		{"net=ALLOW|tcp|*|443|OUT\nnet=ALLOW|udp|::1|53|IN", AnyProto},
		{"net=ALLOW|*|*|*|*", AnyProto},
	}
	for _, tt := range tests {
		if got := e.mustParse(t, tt.rules).Network().Protocols(); got != tt.want {
			t.Errorf("%q: Protocols() = %v, want %v", tt.rules, got, tt.want)
		}
	}
}

func TestNetStrings(t *testing.T) {
	tests := []struct {
		got  fmt.Stringer
		want string
	}{
		{Allow, "ALLOW"},
		{Deny, "DENY"},
		{Action(0), "Action(0)"},
		{TCP, "tcp"},
		{UDP, "udp"},
		{AnyProto, "tcp,udp"},
		{Proto(0), "none"},
		{Proto(4), "Proto(4)"},
		{In, "IN"},
		{Out, "OUT"},
		{Both, "IN,OUT"},
		{Direction(0), "none"},
		{PortRange{443, 443}, "443"},
		{PortRange{0, 65535}, "0-65535"},
		{PortRange{6000, 65535}, "6000-65535"},
	}
	for _, tt := range tests {
		if s := tt.got.String(); s != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.got, s, tt.want)
		}
	}
}

// net100k is a profile of 100,000 net= lines of literal addresses and CIDRs.
func net100k() []byte {
	var b strings.Builder
	for i := range 100_000 {
		x, y := i>>8&0xff, i&0xff
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "net=ALLOW|tcp|10.%d.%d.1|443|OUT\n", x, y)
		case 1:
			fmt.Fprintf(&b, "net=DENY|*|172.%d.%d.0/24|*|OUT\n", 16+x%16, y)
		case 2:
			fmt.Fprintf(&b, "net=ALLOW|udp|2001:db8:%x:%x::/64|1000-2000,3000-|IN,OUT\n", x, y)
		default:
			fmt.Fprintf(&b, "net=ALLOW|TCP|192.168.%d.%d|80,8080|*\n", x, y)
		}
	}
	return []byte(b.String())
}

func BenchmarkParseNet100k(b *testing.B) {
	e := newNetEnv(b, "", nil)
	data := net100k()
	name := e.dir + "/" + DefaultName
	b.ResetTimer()
	for b.Loop() {
		p, err := Parse(context.Background(), name, data, e.opts())
		if err != nil {
			b.Fatal(err)
		}
		if n := len(p.Network().rules); n != 100_000 {
			b.Fatalf("%d rules", n)
		}
	}
}

// TestNetParse100k loads the benchmark's profile once and checks every rule is kept
// (BenchmarkParseNet100k measures the time).
func TestNetParse100k(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	e := newNetEnv(t, "", nil)
	start := time.Now()
	p, err := Parse(context.Background(), e.dir+"/"+DefaultName, net100k(), e.opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100,000 net= lines parsed in %v", time.Since(start))
	rules := p.Network().Rules()
	if len(rules) != 100_000 {
		t.Fatalf("%d rules", len(rules))
	}
	for i, r := range rules {
		if r.Ref.Line != i+1 {
			t.Fatalf("rule %d comes from line %d", i, r.Ref.Line)
		}
	}
}

// FuzzNetRule parses arbitrary net= values: no panic, no hang, and an accepted rule
// is well formed. Host names go to the loopback test DNS server only.
func FuzzNetRule(f *testing.F) {
	for _, s := range []string{
		"ALLOW|tcp|1.2.3.4|80|OUT",
		"DENY|*|10.0.0.0/8|*|OUT",
		"ALLOW|udp,tcp|::ffff:10.0.0.0/104|1-,5-6,*|IN,OUT",
		"ALLOW|any|fuzz.test|53|*",
		"ALLOW|tcp|localhost||IN",
	} {
		f.Add(s)
	}
	e := newNetEnv(f, "192.0.2.1 hosts.test\n", map[string][]string{"fuzz.test": {"192.0.2.2", "2001:db8::2"}})
	e.wait = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	name := e.dir + "/" + DefaultName
	f.Fuzz(func(t *testing.T, value string) {
		if strings.ContainsAny(value, "\r\n") {
			t.Skip("one line only")
		}
		p, err := Parse(context.Background(), name, []byte("net="+value), e.opts())
		if err != nil {
			var ce ConfigErrors
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not ConfigErrors", err, err)
			}
			for _, c := range ce {
				if c.Ref.Line != 1 {
					t.Fatalf("error %q not at line 1", c)
				}
			}
			return
		}
		n := p.Network()
		if n.Empty() && strings.TrimSpace(value) != "" {
			// Only a dropped rule may leave no rule, and then the network is not empty.
			t.Fatalf("accepted %q but Empty()", value)
		}
		for _, r := range n.Rules() {
			if r.Action != Allow && r.Action != Deny || r.Protos == 0 || r.Protos&^AnyProto != 0 || r.Dir == 0 || r.Dir&^Both != 0 {
				t.Fatalf("malformed rule %+v", r)
			}
			if len(r.Prefixes) == 0 {
				t.Fatalf("rule %q covers no address", r.Raw)
			}
			for _, pf := range r.Prefixes {
				if !pf.IsValid() || pf != pf.Masked() || pf.Addr().Is4In6() || pf.Addr().Zone() != "" {
					t.Fatalf("rule %q: bad prefix %v", r.Raw, pf)
				}
			}
			for _, pr := range r.Ports {
				if pr.Lo > pr.Hi {
					t.Fatalf("rule %q: bad range %v", r.Raw, pr)
				}
			}
			for _, pf := range r.Prefixes {
				if len(r.Ports) > 0 && !r.Matches(TCP, pf.Addr(), r.Ports[0].Lo, In) && r.Protos&TCP != 0 && r.Dir&In != 0 {
					t.Fatalf("rule %q does not match its own network", r.Raw)
				}
			}
			n.Allowed(TCP, r.Prefixes[0].Addr(), 80, Out)
			n.AllowedHost(UDP, r.Host, 53, In)
		}
	})
}
