package pysandboxes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
)

// TestEvalFallbackFreshProcessPerEvaluation: without the zygote
// (WithEval(EvalConfig{NoFork: true}), what the sandbox also does by itself when forking does
// not work in it), each evaluation starts a fresh interpreter, under the same
// guard and hard limits.
func TestEvalFallbackFreshProcessPerEvaluation(t *testing.T) {
	sb := evalSandbox(t, limitRules+"eval-syntax:agent=assign, arith\n", pysandboxes.WithEval(pysandboxes.EvalConfig{NoFork: true}))
	ctx := context.Background()
	if v, err := sb.Eval(ctx, "2+3*4", nil); err != nil || v != int64(14) {
		t.Fatalf("2+3*4 = %v, %v", v, err)
	}
	if _, err := sb.Exec(ctx, "x = 1", nil, pysandboxes.EvalProfile("agent")); err != nil {
		t.Fatal(err)
	}
	var re *pysandboxes.RemoteError
	if _, err := sb.Eval(ctx, "x", nil, pysandboxes.EvalProfile("agent")); !errors.As(err, &re) || re.Qualname != "NameError" {
		t.Errorf("x in the next evaluation: %v", err)
	}
	_, err := sb.Eval(ctx, "sum(range(10**12))", nil)
	interrupted(t, err, "eval-timeout")
	_, err = sb.Eval(ctx, "bytes(10**10)", nil, pysandboxes.EvalMemory(512<<20))
	interrupted(t, err, "memory")
	_, err = sb.Eval(ctx, "().__class__", nil)
	var rej *evalguard.RejectedError
	if !errors.As(err, &rej) {
		t.Errorf("rejected: %v", err)
	}
	if v, err := sb.Eval(ctx, "1+1", nil); err != nil || v != int64(2) {
		t.Errorf("after: %v, %v", v, err)
	}
}
