package evalguard_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/evalguard"
)

// TestInterruptedRule: the exhausted budget reads as the rule line that set it.
func TestInterruptedRule(t *testing.T) {
	for _, c := range []struct {
		budget string
		limit  any
		want   string
	}{
		{"eval-timeout", 2.5, "eval-timeout=2.5s"},
		{"eval-max-iterations", int64(1000), "eval-max-iterations=1000"},
		{"memory", int64(536870912), "memory=536870912 bytes"},
		{"output", int64(4096), "output=4096 bytes"},
		{"cpu", int64(1), "cpu=1s"},
		{"eval-max-alloc", nil, "eval-max-alloc"},
		{"eval-max-call-depth", "x", "eval-max-call-depth=x"},
	} {
		e := &evalguard.InterruptedError{Budget: c.budget, Limit: c.limit}
		if got := e.Rule(); got != c.want {
			t.Errorf("Rule() of %s=%v = %q, want %q", c.budget, c.limit, got, c.want)
		}
	}
}
