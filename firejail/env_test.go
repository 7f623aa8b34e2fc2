package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestEnvironmentExact: the program sees exactly the policy's variables (values
// with spaces, '=', newlines and non-ASCII kept), not the host's (a secret set in
// the host's environment never reaches it), and none that firejail or the provider
// would add (PWD, container...).
func TestEnvironmentExact(t *testing.T) {
	providertest.EnvironmentExact(t, providerName)
}

// TestEnvironmentOverridesFirejail: the variables firejail sets itself (SHELL,
// container) keep the policy's values, and the loader's variables reach the
// program without acting on firejail (a root process).
func TestEnvironmentOverridesFirejail(t *testing.T) {
	sb := sandbox(t, []string{"env=SHELL=/bin/policy-shell", "env=container=policy", "env=LD_BIND_NOW=1"})
	out := providertest.Py(t, sb, "import os; print(sorted(os.environ.items()))")
	providertest.ExpectLine(t, out, "[('LD_BIND_NOW', '1'), ('SHELL', '/bin/policy-shell'), ('container', 'policy')]")
}

// TestEnvironmentNotOnCommandLine: the values of the environment never appear on
// a host process's command line (firejail receives them in its environment).
func TestEnvironmentNotOnCommandLine(t *testing.T) {
	providertest.EnvironmentNotOnCommandLine(t, providerName)
}

// TestEnvironmentFromRequest: Sandbox.Python's own variables (the Python layer's)
// reach the program too: the request's environment is what counts.
func TestEnvironmentFromRequest(t *testing.T) {
	providertest.EnvironmentFromRequest(t, providerName)
}
