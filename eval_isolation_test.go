package pysandboxes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pysandboxes/pysandboxes"
)

// TestEvalIsolationBetweenEvaluations: each evaluation runs in a process of its
// own: a global one binds is absent from the next, and data handed in by one is
// not seen by another.
func TestEvalIsolationBetweenEvaluations(t *testing.T) {
	sb := evalSandbox(t, "eval-syntax=assign, arith\n")
	ctx := context.Background()
	ns, err := sb.Exec(ctx, "secret = 41 + 1", map[string]any{"token": "t0ps3cret"})
	if err != nil || ns["secret"] != int64(42) {
		t.Fatalf("Exec = %v, %v", ns, err)
	}
	for _, src := range []string{"secret", "token"} {
		_, err = sb.Eval(ctx, src, nil)
		var re *pysandboxes.RemoteError
		if !errors.As(err, &re) || re.Qualname != "NameError" {
			t.Errorf("%s in the next evaluation: %v, want a NameError", src, err)
		}
	}
}
