package netfilter

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pysandboxes/pysandboxes/policy"
)

func TestCompileRefusesRulesItCannotServe(t *testing.T) {
	n, err := loadRules(t,
		"net=ALLOW|tcp|::1|5432|OUT",           // the host's IPv6 loopback
		"net=ALLOW|tcp|127.0.0.53|53|OUT",      // a host loopback address other than 127.0.0.1
		"net=ALLOW|udp|10.0.2.15|53|OUT",       // inside the egress network
		"net=ALLOW|tcp|v6only.test|443|OUT",    // a host with IPv6 addresses only
		"net=ALLOW|tcp|127.0.0.1|1000-2000|IN", // too many forwards
		"net=ALLOW|tcp|srv.test|443|OUT",       // fine
	)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(n)
	if err == nil {
		t.Fatal("Compile accepted rules it cannot enforce")
	}
	var lines []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var re *RuleError
		if !errors.As(e, &re) {
			t.Errorf("error %v is not a *RuleError", e)
			continue
		}
		lines = append(lines, re.Rule.Ref.Line)
		if !strings.HasPrefix(e.Error(), ruleFile+"(") {
			t.Errorf("error %q does not start with the rule's file(line)", e)
		}
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5}, lines); diff != "" {
		t.Errorf("refused lines (-want +got):\n%s", diff)
	}
	for _, want := range []string{"IPv6", "only 127.0.0.1", "egress network 10.0.2.0/24", "forward 1001 tcp ports"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors do not say %q:\n%v", want, err)
		}
	}
}

func TestCompileForwardsInAll(t *testing.T) {
	n, err := loadRules(t, "net=ALLOW|tcp|127.0.0.1|1000-1200|IN", "net=ALLOW|udp|localhost|2000-2100|IN")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(n)
	if err == nil || !strings.Contains(err.Error(), ruleFile+"(1), "+ruleFile+"(2): ") || !strings.Contains(err.Error(), "forward 302 ports") {
		t.Errorf("Compile = %v, want the two rules named and 302 ports", err)
	}
}

func TestCompileWarnsAboutUnreachableAddresses(t *testing.T) {
	f := compileRules(t, "net=ALLOW|tcp|localhost|5432|OUT", "net=ALLOW|tcp|*|443|OUT")
	w := f.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], ruleFile+"(1)") || !strings.Contains(w[0], "::1") || !strings.Contains(w[0], "enforced for 127.0.0.1") {
		t.Errorf("Warnings = %q, want one about ::1 of rule 1", w)
	}
}

func TestCompileNoEgress(t *testing.T) {
	for _, rules := range [][]string{
		nil,
		{"net=DENY|*|*|*|*"},
		{"net=ALLOW|tcp|*|8080|IN"},                 // listening inside, not forwarded
		{"net=ALLOW|tcp|10.0.0.0/8|8080|IN"},        // idem
		{"net=ALLOW|tcp|srv.test||OUT"},             // no port: matches nothing
		{"net=ALLOW|tcp|unresolvable.test|443|OUT"}, // dropped at load
	} {
		f := compileRules(t, rules...)
		if f.Egress() || f.ResolvConf() != nil || len(f.Forwards()) != 0 {
			t.Errorf("%q: Egress %v, ResolvConf %q, Forwards %v: want none", rules, f.Egress(), f.ResolvConf(), f.Forwards())
		}
	}
}

func TestCompileForwards(t *testing.T) {
	f := compileRules(t,
		"net=ALLOW|tcp|127.0.0.1|8080|IN",
		"net=ALLOW|tcp,udp|localhost|9000-9002|IN",
		"net=ALLOW|tcp|0.0.0.0|7000,0|IN", // port 0 (an ephemeral bind) cannot be forwarded
		"net=ALLOW|tcp|*|6000|IN",         // any address: not forwarded
		"net=DENY|tcp|127.0.0.0/8|9001|IN",
	)
	type fw struct {
		Proto policy.Proto
		Port  uint16
		Line  int
	}
	var got []fw
	for _, x := range f.Forwards() {
		got = append(got, fw{x.Proto, x.Port, x.Rule.Ref.Line})
	}
	want := []fw{{policy.TCP, 7000, 3}, {policy.TCP, 8080, 1}, {policy.TCP, 9000, 2}, {policy.TCP, 9002, 2},
		{policy.UDP, 9000, 2}, {policy.UDP, 9001, 2}, {policy.UDP, 9002, 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Forwards (-want +got):\n%s", diff)
	}
	if !f.Egress() {
		t.Error("forwards need the egress stack")
	}
}

func TestCompileRuleset(t *testing.T) {
	f := compileRules(t,
		"net=DENY|tcp|10.0.0.0/8|22|OUT",
		"net=ALLOW|tcp|srv2.test|80,443,8000-9000|OUT",
		"net=ALLOW|tcp|127.0.0.1|5432|OUT",
	)
	s := f.String()
	for _, want := range []string{
		"type filter hook output priority -150; policy drop;",
		`ip daddr 10.0.0.0/8 tcp dport 22 reject with tcp reset comment "` + ruleFile + `(1): net=DENY|tcp|10.0.0.0/8|22|OUT"`,
		"ip daddr { " + addr(3) + ", " + addr(130) + " } tcp dport { 80, 443, 8000-9000 } accept",
		"ip daddr 10.0.2.3 udp dport 53 accept",
		"ip daddr 10.0.2.0/24 meta l4proto tcp reject with tcp reset",
		`meta l4proto tcp reject with tcp reset comment "DENIED by implicit default policy"`,
		"ip daddr 127.0.0.1 tcp dport 5432 dnat ip to 10.0.2.2",
		`oifname "tap0" ip saddr 127.0.0.0/8 masquerade`,
		"host loopback on",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("String lacks %q:\n%s", want, s)
		}
	}
	// DENY rules come before the resolver and every ALLOW rule.
	if strings.Index(s, "dport 22 reject") > strings.Index(s, "10.0.2.3 udp dport 53") {
		t.Errorf("a DENY rule comes after the resolver:\n%s", s)
	}
}

func TestHostsFromPins(t *testing.T) {
	f := compileRules(t, "net=ALLOW|tcp|srv2.test|443|OUT", "net=DENY|tcp|srv.test|*|OUT", "net=ALLOW|tcp|Localhost.|5432|OUT")
	want := "# The sandbox's hosts file, written from the host names pinned by its policy.\n" +
		"::1\tip6-localhost ip6-loopback\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost\n" +
		addr(2) + "\tsrv.test\n" +
		addr(3) + "\tsrv2.test\n" +
		addr(130) + "\tsrv2.test\n"
	if diff := cmp.Diff(want, string(f.Hosts())); diff != "" {
		t.Errorf("Hosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("# The sandbox's hosts file, written from the host names pinned by its policy.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		string(compileRules(t).Hosts())); diff != "" {
		t.Errorf("Hosts without pins (-want +got):\n%s", diff)
	}
}

func TestCompileNilNetwork(t *testing.T) {
	f, err := Compile(nil)
	if err != nil || f.Egress() {
		t.Fatalf("Compile(nil) = %v, %v", f, err)
	}
}

// TestHostLoopback: the ports of the host's 127.0.0.1 that OUT rules let
// through, per protocol, the DENY rules' ports taken out; none without such a
// rule.
func TestHostLoopback(t *testing.T) {
	n, err := loadRules(t,
		"net=ALLOW|tcp|*|8000-8005|OUT",
		"net=DENY|tcp|127.0.0.0/8|8002-8003|OUT",
		"net=ALLOW|udp|localhost|53|OUT",
		"net=ALLOW|tcp|srv.test|443|OUT",
		"net=ALLOW|tcp|127.0.0.1|9000|IN")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(n)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]policy.PortRange{{Lo: 8000, Hi: 8001}, {Lo: 8004, Hi: 8005}}, f.HostLoopback(policy.TCP)); diff != "" {
		t.Errorf("TCP (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]policy.PortRange{{Lo: 53, Hi: 53}}, f.HostLoopback(policy.UDP)); diff != "" {
		t.Errorf("UDP (-want +got):\n%s", diff)
	}
	n, err = loadRules(t, "net=ALLOW|tcp|srv.test|443|OUT")
	if err != nil {
		t.Fatal(err)
	}
	if f, err = Compile(n); err != nil {
		t.Fatal(err)
	}
	if got := f.HostLoopback(policy.TCP); got != nil {
		t.Errorf("without a loopback rule: %v", got)
	}
}
