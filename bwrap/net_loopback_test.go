package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestLoopbackOnlyWithoutNetRules: without a net= rule the sandbox has its own
// network namespace with only the loopback interface: a listener of the host on
// 127.0.0.1 is unreachable (ECONNREFUSED: another loopback), any other address
// unroutable (ENETUNREACH); listening is refused without an IN rule (Landlock's
// TCP bind rules: EACCES), and abstract Unix sockets of the host are out of
// reach.
func TestLoopbackOnlyWithoutNetRules(t *testing.T) {
	providertest.LoopbackOnlyWithoutNetRules(t, providerName)
}

// TestNetRuleRefused: a net= rule that cannot be enforced here (an IPv6
// destination: the filter's egress network is IPv4 only; any rule that lets
// traffic out when the filter cannot work here) is refused with its file(line);
// a policy with DENY rules only runs with loopback only.
func TestNetRuleRefused(t *testing.T) {
	providertest.NetRuleRefused(t, providerName)
}

// TestListenNeedsAnInRule: an IN rule lets the program listen on its ports (port 0:
// any ephemeral port) and talk to itself over its loopback; MPTCP sockets, which
// go around Landlock's rules, are refused.
func TestListenNeedsAnInRule(t *testing.T) {
	sb := sandbox(t, []string{"net=ALLOW|tcp|127.0.0.1|0|IN"})
	out := py(t, sb, tryPrelude+`
def self_talk():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname()); c.close(); srv.close()
attempt("ephemeral", self_talk)
attempt("fixed", lambda: socket.socket().bind(("127.0.0.1", 8080)))
attempt("mptcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close())
`)
	expectLine(t, out, "ephemeral OK None")
	expectLine(t, out, "fixed EACCES")
	expectLine(t, out, "mptcp EPERM")
}
