package bwrap_test

import (
	"fmt"
	"strconv"
	"testing"
)

// TestNetTCPByHostAndPort: with net= rules, TCP leaves only to the allowed
// address and port (the filter answers anything else with a reset:
// ECONNREFUSED), a DENY rule wins over a wider ALLOW, and UDP sockets are refused
// without a UDP rule; the server sees only the allowed connection.
func TestNetTCPByHostAndPort(t *testing.T) {
	n := newTestNet(t)
	sb := sandbox(t, []string{
		"net=ALLOW|tcp|" + n.Addr(2) + "|" + strconv.Itoa(tcpA) + "," + strconv.Itoa(tcpB) + "|OUT",
		"net=DENY|tcp|" + n.Addr(2) + "|" + strconv.Itoa(tcpB) + "|OUT",
	})
	out := py(t, sb, netPrelude+`
a, b, port_a, port_b, port_c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
attempt("allowed", lambda: tcp(a, port_a))
attempt("denied-port", lambda: tcp(a, port_b))
attempt("default-port", lambda: tcp(a, port_c))
attempt("other-host", lambda: tcp(b, port_a))
attempt("udp", lambda: udp(a, 5301))
attempt("ipv6", lambda: socket.create_connection(("2001:db8::1", 80), timeout=5))
`, n.Addr(2), n.Addr(3), strconv.Itoa(tcpA), strconv.Itoa(tcpB), strconv.Itoa(tcpC))
	expectLine(t, out, "allowed OK hello")
	for _, l := range []string{"denied-port", "default-port", "other-host"} {
		expectLine(t, out, l+" ECONNREFUSED")
	}
	expectLine(t, out, "udp EPERM")
	expectLine(t, out, "ipv6 ENETUNREACH")
	if !n.Saw(false, fmt.Sprintf("%s:%d", n.Addr(2), tcpA)) {
		t.Error("the server did not see the allowed connection")
	}
	for _, l := range []string{fmt.Sprintf("%s:%d", n.Addr(2), tcpB), fmt.Sprintf("%s:%d", n.Addr(2), tcpC), fmt.Sprintf("%s:%d", n.Addr(3), tcpA)} {
		if n.Saw(false, l) {
			t.Errorf("the server saw a refused connection to %s", l)
		}
	}
}
