package firejail_test

import (
	"fmt"
	"strconv"
	"testing"
)

// TestNetUDPByPort: a UDP rule lets datagrams out to its port only (the filter
// drops the others: send fails with EPERM), and the replies come back.
func TestNetUDPByPort(t *testing.T) {
	n := newTestNet(t)
	sb := sandbox(t, []string{"net=ALLOW|udp|" + n.Addr(2) + "|" + strconv.Itoa(udpA) + "|OUT"})
	out := py(t, sb, netPrelude+`
a, pa, pb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
attempt("allowed", lambda: udp(a, pa))
attempt("denied", lambda: udp(a, pb))
attempt("tcp", lambda: tcp(a, 8001))
`, n.Addr(2), strconv.Itoa(udpA), strconv.Itoa(udpB))
	expectLine(t, out, "allowed OK echo:ping")
	expectLine(t, out, "denied EPERM")
	expectLine(t, out, "tcp ECONNREFUSED")
	if n.Saw(true, fmt.Sprintf("%s:%d", n.Addr(2), udpB)) {
		t.Error("the server received a refused datagram")
	}
}
