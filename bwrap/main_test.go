package bwrap_test

import (
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestMain leaves the examples out where bwrap cannot run (no bwrap, no user
// namespaces): the tests skip themselves, saying why.
func TestMain(m *testing.M) {
	providertest.SkipExamplesUnavailable("bwrap")
	os.Exit(m.Run())
}
