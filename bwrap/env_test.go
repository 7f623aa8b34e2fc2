package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestEnvironmentExact: see providertest.EnvironmentExact; bwrap would add PWD,
// which the provider's env(1) removes.
func TestEnvironmentExact(t *testing.T) { providertest.EnvironmentExact(t, providerName) }

// TestEnvironmentPWDFromPolicy: a PWD the policy sets is the one the program
// sees (bwrap would set its own).
func TestEnvironmentPWDFromPolicy(t *testing.T) {
	sb := providertest.Sandbox(t, providerName, []string{"env=PWD=/policy/value"})
	out := providertest.Py(t, sb, "import os; print(sorted(os.environ.items()))")
	providertest.ExpectLine(t, out, "[('PWD', '/policy/value')]")
}

// TestEnvironmentNotOnCommandLine: see
// providertest.EnvironmentNotOnCommandLine; bwrap reads the values from a
// descriptor.
func TestEnvironmentNotOnCommandLine(t *testing.T) {
	providertest.EnvironmentNotOnCommandLine(t, providerName)
}

// TestEnvironmentFromRequest: see providertest.EnvironmentFromRequest; the
// request's environment is what bwrap gets.
func TestEnvironmentFromRequest(t *testing.T) { providertest.EnvironmentFromRequest(t, providerName) }
