package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// providerName is the provider these tests run.
const providerName = "bwrap"

// The shared test support of the providers (package internal/providertest), by
// the names these tests use.
var (
	python         = providertest.Python
	quietLogger    = providertest.QuietLogger
	requireSeccomp = providertest.RequireSeccomp
	run            = providertest.Run
	py             = providertest.Py
	expectLine     = providertest.ExpectLine
	expectOneOf    = providertest.ExpectOneOf
	writeFile      = providertest.WriteFile
)

const tryPrelude = providertest.TryPrelude

// requireBwrap skips the test when bwrap cannot run here.
func requireBwrap(t testing.TB) pysandboxes.Provider {
	t.Helper()
	return providertest.Require(t, providerName)
}

func requireProvider(t testing.TB) pysandboxes.Provider {
	t.Helper()
	return providertest.Require(t, providerName)
}

// sandbox makes a bwrap sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return providertest.Sandbox(t, providerName, lines, opts...)
}
