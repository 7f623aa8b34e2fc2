package pysandboxes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
)

// limitRules grant the C-level calls that the guard's budgets cannot see into:
// only the hard limits of the process stop them.
const limitRules = `eval-syntax=arith, compare
eval-call=sum, range, bytes, len, print
eval-timeout=1s
`

func interrupted(t *testing.T, err error, budget string) *evalguard.InterruptedError {
	t.Helper()
	var ie *evalguard.InterruptedError
	if !errors.As(err, &ie) || ie.Budget != budget {
		t.Fatalf("err = %v (%T), want an InterruptedError of budget %s", err, err, budget)
	}
	return ie
}

// TestEvalHardLimits: the wall clock kills an evaluation blocked in a C call
// (sum(range(10**12)) ticks no budget of the guard); RLIMIT_AS turns
// bytes(10**10) into MemoryError; RLIMIT_CPU kills a spin that the timeout
// would let run; the output limit kills a flood. The host survives each, and the
// next evaluation works.
func TestEvalHardLimits(t *testing.T) {
	sb := evalSandbox(t, limitRules+"eval-timeout:long=30s\neval-syntax:long=arith\neval-call:long=sum, range\n")
	ctx := context.Background()
	next := func(what string) {
		t.Helper()
		if v, err := sb.Eval(ctx, "len(bytes(1000)) + 1", nil); err != nil || v != int64(1001) {
			t.Fatalf("after %s: %v, %v", what, v, err)
		}
	}

	t0 := time.Now()
	_, err := sb.Eval(ctx, "sum(range(10**12))", nil)
	ie := interrupted(t, err, "eval-timeout")
	if ie.Limit != 1.0 || time.Since(t0) > 20*time.Second {
		t.Errorf("timeout: %+v after %v", ie, time.Since(t0))
	}
	next("the timeout")

	_, err = sb.Eval(ctx, "bytes(10**10)", nil, pysandboxes.EvalMemory(512<<20))
	if ie := interrupted(t, err, "memory"); ie.Limit != int64(512<<20) {
		t.Errorf("memory: %+v", ie)
	}
	next("the memory limit")

	_, err = sb.Eval(ctx, "sum(range(10**12))", nil, pysandboxes.EvalProfile("long"), pysandboxes.EvalCPU(time.Second))
	interrupted(t, err, "cpu")
	next("the CPU limit")

	var out limitedBuffer
	_, err = sb.Eval(ctx, "print(bytes(100000))", nil, pysandboxes.EvalMaxOutput(4096), pysandboxes.EvalOutput(&out, &out))
	interrupted(t, err, "output")
	if out.Len() > 4096 {
		t.Errorf("%d bytes of output reached the caller, limit 4096", out.Len())
	}
	next("the output limit")
}

// TestEvalContextKillsTheProcess: a context that ends kills the evaluation's
// process, blocked in C or not.
func TestEvalContextKillsTheProcess(t *testing.T) {
	sb := evalSandbox(t, limitRules+"eval-timeout:long=30s\neval-syntax:long=arith\neval-call:long=sum, range\n")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := sb.Eval(ctx, "sum(range(10**12))", nil, pysandboxes.EvalProfile("long"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if v, err := sb.Eval(context.Background(), "1+1", nil); err != nil || v != int64(2) {
		t.Errorf("after the context: %v, %v", v, err)
	}
}
