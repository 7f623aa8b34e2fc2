package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// providerName is the provider these tests run; the shared scenarios and test
// support are in package internal/providertest.
const providerName = "firejail"

// sandbox makes a firejail sandbox for the rule lines. firejail shows the names
// of the host's top directories (blacklisted, not removed): files-meta, which it
// does not claim, is accepted (providertest.Unclaimed).
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return providertest.Sandbox(t, providerName, lines, opts...)
}
