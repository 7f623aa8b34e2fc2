package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// The network scenarios (package internal/providertest) run through bwrap's
// network namespace; with net= rules, through the network filter and its
// egress stack. The tests that send traffic build a network of their own:
// 10.233.R.0/24 (newTestNet).

// newTestNet builds the test network of one test (see providertest.NewNet),
// removed at its end.
func newTestNet(t *testing.T) *providertest.Net {
	t.Helper()
	return providertest.NewNet(t, providerName, 233, "bw")
}

// TestLoopbackOnlyWithoutNetRules: bwrap --unshare-net gives the loopback only.
func TestLoopbackOnlyWithoutNetRules(t *testing.T) {
	providertest.LoopbackOnlyWithoutNetRules(t, providerName)
}

// TestNetRuleRefused: what the filter cannot enforce is refused before bwrap
// starts.
func TestNetRuleRefused(t *testing.T) { providertest.NetRuleRefused(t, providerName) }

// TestListenNeedsAnInRule: MPTCP sockets are refused by the provider's seccomp
// filter (EPERM).
func TestListenNeedsAnInRule(t *testing.T) {
	providertest.ListenNeedsAnInRule(t, providerName, "EPERM")
}

// TestNetTCPByHostAndPort: UDP sockets are refused by the seccomp filter
// without a UDP rule.
func TestNetTCPByHostAndPort(t *testing.T) {
	providertest.NetTCPByHostAndPort(t, providerName, newTestNet(t))
}

// TestNetUDPByPort: a UDP rule opens the seccomp filter to UDP; the network
// filter picks the port.
func TestNetUDPByPort(t *testing.T) { providertest.NetUDPByPort(t, providerName, newTestNet(t)) }

// TestNetHostLoopbackAndNames: the filter's resolver is named on the second
// line of the sandbox's resolv.conf.
func TestNetHostLoopbackAndNames(t *testing.T) {
	newTestNet(t) // skips without the filter
	providertest.NetHostLoopbackAndNames(t, providerName, true)
}

// TestNetNoLeaks: bwrap's runs with the filter leave nothing behind.
func TestNetNoLeaks(t *testing.T) { providertest.NetNoLeaks(t, providerName, newTestNet(t)) }
