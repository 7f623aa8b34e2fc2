package landlock_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestUDPAndRawSocketsRefused: without a UDP rule no UDP socket can be made, and
// raw and packet sockets never (EPERM from seccomp; as root they would work).
func TestUDPAndRawSocketsRefused(t *testing.T) {
	providertest.RequireSeccomp(t)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	sb := sandbox(t, []string{"net=ALLOW|tcp|*|443|OUT"})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
p = int(sys.argv[1])
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"leak", ("127.0.0.1", p))
attempt("udp", udp)
attempt("udp6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("icmp-dgram", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
`, strconv.Itoa(port))
	for _, l := range []string{"udp", "udp6", "raw", "packet", "icmp-dgram"} {
		providertest.ExpectLine(t, out, l+" EPERM")
	}
}

// TestUDPRuleNeedsCapUDP: a UDP rule cannot be filtered by port by this Landlock:
// refused unless udp is accepted, and then UDP is allowed.
func TestUDPRuleNeedsCapUDP(t *testing.T) {
	providertest.Require(t, "landlock")
	providertest.RequireSeccomp(t)
	rule := "net=ALLOW|udp|*|53|OUT"
	_, err := providertest.New(t, "landlock", rule)
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), rule) {
		t.Fatalf("want an UnenforcedError naming %s, got %v", rule, err)
	}
	sb := sandbox(t, []string{rule}, pysandboxes.AcceptUnenforced(pysandboxes.CapUDP))
	out := providertest.Py(t, sb, providertest.TryPrelude+`attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())`)
	providertest.ExpectLine(t, out, "udp OK None")
}
