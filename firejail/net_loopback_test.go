package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestLoopbackOnlyWithoutNetRules: see providertest.LoopbackOnlyWithoutNetRules.
func TestLoopbackOnlyWithoutNetRules(t *testing.T) {
	providertest.LoopbackOnlyWithoutNetRules(t, providerName)
}

// TestNetRuleRefused: see providertest.NetRuleRefused.
func TestNetRuleRefused(t *testing.T) { providertest.NetRuleRefused(t, providerName) }

// TestListenNeedsAnInRule: see providertest.ListenNeedsAnInRule. firejail cannot
// refuse MPTCP sockets: a listener made so is still out of reach of anything
// outside the sandbox's network namespace.
func TestListenNeedsAnInRule(t *testing.T) {
	providertest.ListenNeedsAnInRule(t, providerName, "")
}
