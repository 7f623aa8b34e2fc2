package landlock_test

import (
	"context"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// The shared scenarios and test support of the providers are in package
// internal/providertest; what the landlock tests accept as not enforced (the
// names and metadata of unexposed paths, hide, and without seccomp the network
// capabilities) is providertest.Accepted("landlock").

// sandbox makes a landlock sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return providertest.Sandbox(t, "landlock", lines, opts...)
}

// newSubprocess makes a subprocess sandbox (the supervisor without confinement).
func newSubprocess(t testing.TB) (*pysandboxes.Sandbox, error) {
	return pysandboxes.New(context.Background(), providertest.Build(t), pysandboxes.WithProvider("subprocess"),
		pysandboxes.WithLogger(providertest.QuietLogger()), pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities))
}
