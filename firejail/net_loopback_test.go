package firejail_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
)

// TestLoopbackOnlyWithoutNetRules: without a net= rule the sandbox has its own
// network namespace with only the loopback interface: a listener of the host on
// 127.0.0.1 is unreachable (ECONNREFUSED: another loopback), any other address
// unroutable (ENETUNREACH); listening is refused without an IN rule (Landlock's
// TCP bind rules: EACCES), and abstract Unix sockets of the host are out of
// reach.
func TestLoopbackOnlyWithoutNetRules(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	abstract, err := net.Listen("unix", "@firejail-test-"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	sb := sandbox(t, nil)
	out := py(t, sb, tryPrelude+`
port = int(sys.argv[1])
print("ifaces", [n for _, n in socket.if_nameindex()])
def connect(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr)
    finally:
        s.close()
attempt("host-listener", lambda: connect(("127.0.0.1", port)))
attempt("elsewhere", lambda: connect(("10.1.2.3", 80)))
def self_talk():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname()); c.close(); srv.close()
attempt("self", self_talk)
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(b"\0" + sys.argv[2].encode())
    finally:
        s.close()
attempt("abstract", abstract)
`, port, "firejail-test-"+port)
	expectLine(t, out, "ifaces ['lo']")
	expectLine(t, out, "host-listener ECONNREFUSED")
	expectLine(t, out, "elsewhere ENETUNREACH")
	expectLine(t, out, "self EACCES")
	expectLine(t, out, "abstract ECONNREFUSED")
}

// TestNetRuleRefused: a net= rule that cannot be enforced here (an IPv6
// destination: the filter's egress network is IPv4 only; any rule that lets
// traffic out when the filter cannot work here) is refused with its file(line);
// a policy with DENY rules only runs with loopback only.
func TestNetRuleRefused(t *testing.T) {
	requireProvider(t)
	for _, rule := range []string{"net=ALLOW|tcp|::1|5432|OUT", "net=ALLOW|tcp|2001:db8::1|443|OUT"} {
		_, err := pysandboxes.New(context.Background(), build(t, rule),
			pysandboxes.WithProvider(providerName), pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(pysandboxes.CapFilesMeta))
		if err == nil || !strings.Contains(err.Error(), "<arg>") || !strings.Contains(err.Error(), strings.TrimPrefix(rule, "net=")) {
			t.Errorf("%s: got %v, want the rule named", rule, err)
		}
	}
	sb := sandbox(t, []string{"net=DENY|TCP|*|*|*"})
	if out := py(t, sb, "import socket; print([n for _, n in socket.if_nameindex()])"); !strings.Contains(out, "['lo']") {
		t.Errorf("got %s", out)
	}
}

// TestListenNeedsAnInRule: an IN rule lets the program listen on its ports (port 0:
// any ephemeral port) and talk to itself over its loopback. firejail cannot
// refuse MPTCP sockets, which go around Landlock's rules: a listener made so is
// still out of reach of anything outside the sandbox's network namespace.
func TestListenNeedsAnInRule(t *testing.T) {
	sb := sandbox(t, []string{"net=ALLOW|tcp|127.0.0.1|0|IN"})
	out := py(t, sb, tryPrelude+`
def self_talk():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname()); c.close(); srv.close()
attempt("ephemeral", self_talk)
attempt("fixed", lambda: socket.socket().bind(("127.0.0.1", 8080)))
`)
	expectLine(t, out, "ephemeral OK None")
	expectLine(t, out, "fixed EACCES")
}
