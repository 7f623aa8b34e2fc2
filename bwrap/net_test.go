package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

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
	providertest.NetTCPByHostAndPort(t, providerName, providertest.TestNet(t, providerName))
}

// TestNetUDPByPort: a UDP rule opens the seccomp filter to UDP; the network
// filter picks the port.
func TestNetUDPByPort(t *testing.T) {
	providertest.NetUDPByPort(t, providerName, providertest.TestNet(t, providerName))
}

// TestNetHostLoopbackAndNames: the filter's resolver is named on the second
// line of the sandbox's resolv.conf.
func TestNetHostLoopbackAndNames(t *testing.T) {
	providertest.TestNet(t, providerName) // skips without the filter
	providertest.NetHostLoopbackAndNames(t, providerName, true)
}

// TestNetNoLeaks: bwrap's runs with the filter leave nothing behind.
func TestNetNoLeaks(t *testing.T) {
	providertest.NetNoLeaks(t, providerName, providertest.TestNet(t, providerName))
}
