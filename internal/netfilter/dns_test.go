package netfilter

import (
	"strings"
	"testing"
)

// The egress stack forwards the sandbox's resolver (10.0.2.3) to the host's, which
// TestMain made the test server's 10.231.R.53.

func TestDNSOnlyToTheResolver(t *testing.T) {
	s := testServer(t)
	sb, f, _ := setup(t, "net=ALLOW|tcp|srv.test|8001|OUT")
	if got, want := string(f.ResolvConf()), "nameserver 10.0.2.3\n"; !strings.Contains(got, want) {
		t.Errorf("ResolvConf = %q, want it to hold %q", got, want)
	}
	m := s.mark()
	if err := sb.udp(t, "10.0.2.3:53"); err != nil {
		t.Fatalf("DNS over UDP to the resolver: %v", err)
	}
	if !s.sawUDP(m, addr(53)+":53") {
		t.Errorf("the host's resolver did not receive the query")
	}
	if err := sb.tcp(t, "10.0.2.3:53"); err != nil {
		t.Fatalf("DNS over TCP to the resolver: %v", err)
	}
	// Any other resolver, the real one included, is refused.
	wantUDPRefused(t, sb, s, addr(53)+":53")
	wantUDPRefused(t, sb, s, addr(2)+":53")
	wantRefused(t, sb, s, addr(2)+":53")
	// The resolver's address serves DNS only.
	wantUDPRefused(t, sb, nil, "10.0.2.3:5301")
	wantRefused(t, sb, nil, "10.0.2.3:8001")
}

func TestDNSRefusedByDenyRule(t *testing.T) {
	s := testServer(t)
	sb, f, _ := setup(t, "net=ALLOW|tcp|srv.test|8001|OUT", "net=DENY|udp|*|53|OUT")
	if got := string(f.ResolvConf()); !strings.Contains(got, "nameserver 10.0.2.3\noptions use-vc\n") {
		t.Errorf("ResolvConf = %q, want the resolver over TCP only", got)
	}
	wantUDPRefused(t, sb, s, "10.0.2.3:53")
	if err := sb.tcp(t, "10.0.2.3:53"); err != nil {
		t.Fatalf("DNS over TCP to the resolver: %v", err)
	}
}

func TestDNSNoResolverWhenAllDNSDenied(t *testing.T) {
	f := compileRules(t, "net=ALLOW|tcp|*|443|OUT", "net=DENY|*|*|53|OUT")
	got := string(f.ResolvConf())
	if strings.Contains(got, "nameserver") || !strings.Contains(got, ruleFile+"(2)") {
		t.Errorf("ResolvConf = %q, want no resolver and the rule that refuses DNS", got)
	}
}
