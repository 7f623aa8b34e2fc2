package netfilter

import "testing"

func TestUDPAllowedVsDenied(t *testing.T) {
	s := testServer(t)
	sb, _, _ := setup(t, "net=ALLOW|udp|srv.test|5301|OUT", "net=ALLOW|tcp|srv.test|5302|OUT")
	if err := sb.udp(t, addr(2)+":5301"); err != nil {
		t.Fatalf("allowed datagram: %v", err)
	}
	wantUDPRefused(t, sb, s, addr(2)+":5302") // a TCP rule does not open UDP
	wantUDPRefused(t, sb, s, addr(3)+":5301") // another address
}

func TestUDPDenyBeatsAllow(t *testing.T) {
	s := testServer(t)
	sb, _, _ := setup(t, "net=DENY|udp|srv2.test|*|OUT", "net=ALLOW|udp|*|5301-5302|OUT")
	if err := sb.udp(t, addr(2)+":5302"); err != nil {
		t.Fatalf("allowed datagram: %v", err)
	}
	wantUDPRefused(t, sb, s, addr(3)+":5301")
	wantUDPRefused(t, sb, s, addr(130)+":5302")
}
