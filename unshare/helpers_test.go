package unshare_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// The shared scenarios and test support of the providers are in package
// internal/providertest.

// sandbox makes an unshare sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return providertest.Sandbox(t, "unshare", lines, opts...)
}
