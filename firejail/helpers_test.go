package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// providerName is the provider these tests run.
const providerName = "firejail"

// The shared test support of the providers (package internal/providertest), by
// the names these tests use.
var (
	python      = providertest.Python
	quietLogger = providertest.QuietLogger
	run         = providertest.Run
	py          = providertest.Py
	expectLine  = providertest.ExpectLine
	expectOneOf = providertest.ExpectOneOf
	writeFile   = providertest.WriteFile
)

const tryPrelude = providertest.TryPrelude

// requireFirejail skips the test when firejail cannot run here.
func requireFirejail(t testing.TB) pysandboxes.Provider {
	t.Helper()
	return providertest.Require(t, providerName)
}

func requireProvider(t testing.TB) pysandboxes.Provider {
	t.Helper()
	return providertest.Require(t, providerName)
}

// sandbox makes a firejail sandbox for the rule lines. firejail shows the names
// of the host's top directories (blacklisted, not removed): files-meta, which it
// does not claim, is accepted.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	opts = append(opts, pysandboxes.AcceptUnenforced(pysandboxes.CapFilesMeta))
	return providertest.Sandbox(t, providerName, lines, opts...)
}
