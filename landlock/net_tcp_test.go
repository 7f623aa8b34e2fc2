package landlock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

const netPrelude = providertest.TryPrelude + `
def connect(port, proto=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    try:
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        return "connected"
    finally:
        s.close()
def bind(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
        return "bound"
    finally:
        s.close()
`

// TestTCPPortRules: an allowed port connects, any other is refused (EACCES), an
// MPTCP socket (which Landlock's TCP rules do not see) cannot even be created
// (EPERM, seccomp), and a DENY rule for every host wins over a wider ALLOW.
func TestTCPPortRules(t *testing.T) {
	providertest.RequireSeccomp(t)
	allowed, denied, carved := providertest.ServeTCP(t, ""), providertest.ServeTCP(t, ""), providertest.ServeTCP(t, "")
	lo, hi := min(carved, allowed)-0, max(carved, allowed)
	sb := sandbox(t, []string{
		fmt.Sprintf("net=ALLOW|tcp|*|%d|OUT", allowed),
		fmt.Sprintf("net=ALLOW|tcp|*|%d-%d|OUT", lo, hi),
		fmt.Sprintf("net=DENY|tcp|*|%d|OUT", carved),
	})
	out := providertest.Py(t, sb, netPrelude+`
a, d, c = map(int, sys.argv[1:4])
attempt("allowed", lambda: connect(a))
attempt("denied", lambda: connect(d))
attempt("carved", lambda: connect(c))
attempt("mptcp-denied", lambda: connect(d, 262))
attempt("mptcp-allowed", lambda: connect(a, 262))
attempt("bind", lambda: bind(0))
`, strconv.Itoa(allowed), strconv.Itoa(denied), strconv.Itoa(carved))
	providertest.ExpectLine(t, out, "allowed OK connected")
	if denied < lo || denied > hi {
		providertest.ExpectLine(t, out, "denied EACCES")
	}
	providertest.ExpectLine(t, out, "carved EACCES")
	providertest.ExpectLine(t, out, "mptcp-denied EPERM")
	providertest.ExpectLine(t, out, "mptcp-allowed EPERM")
	providertest.ExpectLine(t, out, "bind EACCES")
}

// TestNoNetRuleMeansNoTCP: without any net= rule, every TCP connect and bind is
// refused.
func TestNoNetRuleMeansNoTCP(t *testing.T) {
	providertest.RequireSeccomp(t)
	port := providertest.ServeTCP(t, "")
	sb := sandbox(t, nil)
	out := providertest.Py(t, sb, netPrelude+`
p = int(sys.argv[1])
attempt("connect", lambda: connect(p))
attempt("connect6", lambda: socket.create_connection(("::1", p), timeout=5))
attempt("bind0", lambda: bind(0))
attempt("bind", lambda: bind(p + 1))
attempt("mptcp", lambda: connect(p, 262))
`, strconv.Itoa(port))
	providertest.ExpectLine(t, out, "connect EACCES")
	if !strings.Contains(out, "connect6 EACCES") && !strings.Contains(out, "connect6 EADDRNOTAVAIL") && !strings.Contains(out, "connect6 ENETUNREACH") {
		t.Errorf("IPv6 connect not refused:\n%s", out)
	}
	providertest.ExpectLine(t, out, "bind0 EACCES")
	providertest.ExpectLine(t, out, "bind EACCES")
	providertest.ExpectLine(t, out, "mptcp EPERM")
}

// TestBindWithInRule: an IN rule allows binding (and listening on) its port only.
func TestBindWithInRule(t *testing.T) {
	providertest.RequireSeccomp(t)
	port, other := providertest.FreePort(t), providertest.FreePort(t)
	for other == port {
		other = providertest.FreePort(t)
	}
	sb := sandbox(t, []string{fmt.Sprintf("net=ALLOW|tcp|*|%d|IN", port)})
	out := providertest.Py(t, sb, netPrelude+`
p, o = int(sys.argv[1]), int(sys.argv[2])
attempt("bind", lambda: bind(p))
attempt("bind-other", lambda: bind(o))
attempt("connect", lambda: connect(p))
`, strconv.Itoa(port), strconv.Itoa(other))
	providertest.ExpectLine(t, out, "bind OK bound")
	providertest.ExpectLine(t, out, "bind-other EACCES")
	providertest.ExpectLine(t, out, "connect EACCES")
}

// TestHostRuleNeedsNetHosts: a rule naming an address cannot be enforced by
// Landlock: refused unless the caller accepted net-hosts, and then its port is
// open for every host.
func TestHostRuleNeedsNetHosts(t *testing.T) {
	providertest.Require(t, "landlock")
	providertest.RequireSeccomp(t)
	port := providertest.ServeTCP(t, "")
	rule := fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", port)
	_, err := providertest.New(t, "landlock", rule)
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "net-hosts") || !strings.Contains(err.Error(), rule) {
		t.Fatalf("want an UnenforcedError naming the rule and net-hosts, got %v", err)
	}
	var logs providertest.Logs
	logger := logs.DebugLogger()
	sb := sandbox(t, []string{rule}, pysandboxes.AcceptUnenforced(pysandboxes.CapNetHosts), pysandboxes.WithLogger(logger))
	out := providertest.Py(t, sb, netPrelude+`attempt("connect", lambda: connect(int(sys.argv[1])))`, strconv.Itoa(port))
	providertest.ExpectLine(t, out, "connect OK connected")
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "hosts are checked by the Python layer only") {
		t.Errorf("no warning that the host is not enforced:\n%s", logs.String())
	}
}
