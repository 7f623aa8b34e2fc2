package bwrap_test

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

// TestListenNeedsAnInRule: see providertest.ListenNeedsAnInRule.
func TestListenNeedsAnInRule(t *testing.T) {
	providertest.ListenNeedsAnInRule(t, providerName, "EPERM")
}
