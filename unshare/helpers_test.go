package unshare_test

import (
	"strconv"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// The shared test support of the providers (package internal/providertest), by
// the names these tests use.
var (
	python      = providertest.Python
	quietLogger = providertest.QuietLogger
	build       = providertest.Build
	run         = providertest.Run
	sh          = providertest.Sh
	py          = providertest.Py
	expectLine  = providertest.ExpectLine
	writeFile   = providertest.WriteFile
	tempDir     = providertest.TempDir
)

const tryPrelude = providertest.TryPrelude

// requireUnshare skips the test when the provider cannot run here, saying why.
func requireUnshare(t testing.TB) pysandboxes.Provider {
	t.Helper()
	return providertest.Require(t, "unshare")
}

// sandbox makes an unshare sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return providertest.Sandbox(t, "unshare", lines, opts...)
}

func itoa(i int) string { return strconv.Itoa(i) }
