package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestScenarios runs the scenarios shared by the launcher-based providers
// (processes, signals, exit status, leaks after 50 runs, resource limits).
func TestScenarios(t *testing.T) { providertest.Scenarios(t, providerName) }
