package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestEnvironmentExact: see providertest.EnvironmentExact; firejail would add
// its own (container, SHELL...), which the provider's env(1) removes.
func TestEnvironmentExact(t *testing.T) { providertest.EnvironmentExact(t, providerName) }

// TestEnvironmentOverridesFirejail: the variables firejail sets itself (SHELL,
// container) keep the policy's values, and the loader's variables reach the
// program without acting on firejail (a root process).
func TestEnvironmentOverridesFirejail(t *testing.T) {
	sb := providertest.Sandbox(t, providerName, []string{"env=SHELL=/bin/policy-shell", "env=container=policy", "env=LD_BIND_NOW=1"})
	out := providertest.Py(t, sb, "import os; print(sorted(os.environ.items()))")
	providertest.ExpectLine(t, out, "[('LD_BIND_NOW', '1'), ('SHELL', '/bin/policy-shell'), ('container', 'policy')]")
}

// TestEnvironmentNotOnCommandLine: see
// providertest.EnvironmentNotOnCommandLine; firejail receives them in its
// environment.
func TestEnvironmentNotOnCommandLine(t *testing.T) {
	providertest.EnvironmentNotOnCommandLine(t, providerName)
}

// TestEnvironmentFromRequest: see providertest.EnvironmentFromRequest; the
// request's environment is what firejail gets.
func TestEnvironmentFromRequest(t *testing.T) { providertest.EnvironmentFromRequest(t, providerName) }
