package firejail_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestLoopbackOnlyWithoutNetRules: firejail --net=none gives the loopback only.
func TestLoopbackOnlyWithoutNetRules(t *testing.T) {
	providertest.LoopbackOnlyWithoutNetRules(t, providerName)
}

// TestNetRuleRefused: what the filter cannot enforce is refused before firejail
// starts.
func TestNetRuleRefused(t *testing.T) { providertest.NetRuleRefused(t, providerName) }

// TestListenNeedsAnInRule: firejail cannot refuse MPTCP sockets, which go
// around Landlock's rules: a listener made so is still out of reach of
// anything outside the sandbox's network namespace.
func TestListenNeedsAnInRule(t *testing.T) { providertest.ListenNeedsAnInRule(t, providerName, "") }

// TestNetTCPByHostAndPort: without a UDP rule, UDP is dropped by the network
// filter (send fails with EPERM): firejail's seccomp filter lets UDP sockets be
// made.
func TestNetTCPByHostAndPort(t *testing.T) {
	providertest.NetTCPByHostAndPort(t, providerName, providertest.TestNet(t, providerName))
}

// TestNetUDPByPort: the network filter lets datagrams out to the rule's port
// only.
func TestNetUDPByPort(t *testing.T) {
	providertest.NetUDPByPort(t, providerName, providertest.TestNet(t, providerName))
}

// TestNetHostLoopbackAndNames: firejail --dns names the filter's resolver.
func TestNetHostLoopbackAndNames(t *testing.T) {
	providertest.TestNet(t, providerName) // skips without the filter
	providertest.NetHostLoopbackAndNames(t, providerName, false)
}

// TestNetHostsOverExposedEtc: with /etc exposed (idmapped to the program's uid
// when the host is root), firejail still takes the filter's hosts file, which
// replaces the host's; the rest of /etc is the host's.
func TestNetHostsOverExposedEtc(t *testing.T) {
	providertest.Require(t, providerName)
	providertest.TestNet(t, providerName) // skips without the filter
	version, err := os.ReadFile("/etc/debian_version")
	if err != nil {
		t.Skip("no /etc/debian_version here:", err)
	}
	port := providertest.HostListener(t)
	sb := providertest.Sandbox(t, providerName, []string{"expose-ro=/etc", "net=ALLOW|tcp|127.0.0.1|" + port + "|OUT"})
	out := providertest.Py(t, sb, providertest.NetPrelude+`
attempt("host", lambda: tcp("127.0.0.1", int(sys.argv[1])))
print("hosts", open("/etc/hosts").read().splitlines()[0])
print("version", repr(open("/etc/debian_version").read()))
`, port)
	providertest.ExpectLine(t, out, "host OK host")
	providertest.ExpectLine(t, out, "hosts # The sandbox's hosts file, written from the host names pinned by its policy.")
	providertest.ExpectLine(t, out, "version "+pyRepr(string(version)))
}

// pyRepr is Python's repr of a short ASCII string without quotes or backslashes
// but a final line break.
func pyRepr(s string) string {
	return "'" + strings.ReplaceAll(s, "\n", "\\n") + "'"
}

// TestNetNoLeaks: runs with the filter leave no slirp4netns, descriptor or child
// behind.
func TestNetNoLeaks(t *testing.T) {
	n := providertest.TestNet(t, providerName)
	nsBefore := namedNamespaces()
	providertest.NetNoLeaks(t, providerName, n)
	// Other programs of the host may be making their own meanwhile: wait for the
	// new ones to go.
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = left[:0]
		for _, n := range namedNamespaces() {
			if !slices.Contains(nsBefore, n) {
				left = append(left, n)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("named network namespaces left: %v", left)
	}
}

// namedNamespaces lists the network namespaces the network filter named.
func namedNamespaces() []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "pysandboxes-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestNetResolverRefusedByRule: a DENY rule for UDP DNS refuses the resolver's
// datagrams; firejail --dns cannot say "options use-vc", so the sandbox then
// names no resolver (pinned names still resolve through /etc/hosts).
func TestNetResolverRefusedByRule(t *testing.T) {
	n := providertest.TestNet(t, providerName)
	sb := providertest.Sandbox(t, providerName, []string{"net=ALLOW|tcp|" + n.Addr(2) + "|" + strconv.Itoa(providertest.TCPA) + "|OUT", "net=DENY|udp|*|53|OUT"})
	out := providertest.Py(t, sb, providertest.NetPrelude+`
attempt("resolv", lambda: open("/etc/resolv.conf").read())
attempt("dns", lambda: udp("10.0.2.3", 53))
`)
	providertest.ExpectLine(t, out, "resolv ENOENT")
	providertest.ExpectLine(t, out, "dns EPERM")
}
