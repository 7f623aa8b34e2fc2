package netfilter

import (
	"strconv"
	"testing"
)

func TestTCPAllowedHostAndPort(t *testing.T) {
	s := testServer(t)
	sb, _, _ := setup(t, "net=ALLOW|tcp|srv.test|8001|OUT")
	if err := sb.tcp(t, addr(2)+":8001"); err != nil {
		t.Fatalf("allowed connection: %v", err)
	}
	// The server listens there: only the filter refuses.
	wantRefused(t, sb, s, addr(2)+":8002")
	wantRefused(t, sb, s, addr(3)+":8001")
}

func TestTCPDenyBeatsAllow(t *testing.T) {
	s := testServer(t)
	// The DENY line comes after the ALLOW line: it wins all the same.
	sb, _, _ := setup(t,
		"net=ALLOW|tcp|10.231.0.0/16|8001-8003|OUT",
		"net=DENY|tcp|srv.test|8002|OUT")
	for _, a := range []string{addr(2) + ":8001", addr(2) + ":8003", addr(3) + ":8002"} {
		if err := sb.tcp(t, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	wantRefused(t, sb, s, addr(2)+":8002")
}

func TestTCPCIDRAndPortRanges(t *testing.T) {
	s := testServer(t)
	sb, _, _ := setup(t, "net=ALLOW|tcp|10.231."+strconv.Itoa(subnet)+".128/25|9000-9010,9500-|OUT")
	for _, a := range []string{addr(130) + ":9005", addr(130) + ":9500", addr(200) + ":9500"} {
		if err := sb.tcp(t, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	wantRefused(t, sb, s, addr(2)+":9005")   // outside the network
	wantRefused(t, sb, s, addr(130)+":8001") // outside the ports
}

func TestTCPEveryHostOnePort(t *testing.T) {
	s := testServer(t)
	sb, _, _ := setup(t, "net=ALLOW|tcp|*|8003|OUT")
	for _, a := range []string{addr(2) + ":8003", addr(3) + ":8003"} {
		if err := sb.tcp(t, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	wantRefused(t, sb, s, addr(2)+":8001")
}

func TestTCPHostWithManyAddresses(t *testing.T) {
	s := testServer(t)
	// srv2.test is pinned to two addresses: both are allowed, no other.
	sb, _, _ := setup(t, "net=ALLOW|tcp|srv2.test|8001|OUT")
	for _, a := range []string{addr(3) + ":8001", addr(130) + ":8001"} {
		if err := sb.tcp(t, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	wantRefused(t, sb, s, addr(2)+":8001")
}

func TestUDPRuleDoesNotOpenTCP(t *testing.T) {
	s := testServer(t)
	sb, _, _ := setup(t, "net=ALLOW|udp|srv.test|8001|OUT")
	wantRefused(t, sb, s, addr(2)+":8001")
}
