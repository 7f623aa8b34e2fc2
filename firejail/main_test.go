package firejail_test

import (
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestMain leaves the examples out where firejail cannot run (a user that
// firejail refuses, no firejail): the tests skip themselves, saying why.
func TestMain(m *testing.M) {
	providertest.SkipExamplesUnavailable("firejail")
	os.Exit(m.Run())
}
