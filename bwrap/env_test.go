package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestEnvironmentExact: the program sees exactly the policy's variables (values
// with spaces, '=', newlines and non-ASCII kept), not the host's (a secret set in
// the host's environment never reaches it), and none that bwrap or the provider
// would add (PWD, container...).
func TestEnvironmentExact(t *testing.T) {
	providertest.EnvironmentExact(t, providerName)
}

// TestEnvironmentPWDFromPolicy: a PWD the policy sets is the one the program
// sees (bwrap would set its own).
func TestEnvironmentPWDFromPolicy(t *testing.T) {
	sb := sandbox(t, []string{"env=PWD=/policy/value"})
	out := providertest.Py(t, sb, "import os; print(sorted(os.environ.items()))")
	providertest.ExpectLine(t, out, "[('PWD', '/policy/value')]")
}

// TestEnvironmentNotOnCommandLine: the values of the environment never appear on
// a host process's command line (bwrap reads them from a descriptor).
func TestEnvironmentNotOnCommandLine(t *testing.T) {
	providertest.EnvironmentNotOnCommandLine(t, providerName)
}

// TestEnvironmentFromRequest: Sandbox.Python's own variables (the Python layer's)
// reach the program too: the request's environment is what counts.
func TestEnvironmentFromRequest(t *testing.T) {
	providertest.EnvironmentFromRequest(t, providerName)
}
