package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// providerName is the provider these tests run; the shared scenarios and test
// support are in package internal/providertest.
const providerName = "bwrap"

// sandbox makes a bwrap sandbox for the rule lines.
func sandbox(t testing.TB, lines []string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return providertest.Sandbox(t, providerName, lines, opts...)
}
