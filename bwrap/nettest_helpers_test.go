package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// newTestNet builds the test network of one test (see providertest.NewNet),
// removed at its end: 10.233.R.0/24.
func newTestNet(t *testing.T) *providertest.Net {
	t.Helper()
	return providertest.NewNet(t, providerName, 233, "bw")
}
