package pysandboxes_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// residualRules grant what the guard's budgets cannot bound (a regular
// expression's backtracking, one C-level allocation): only the hard limits of
// the process stop them.
const residualRules = limitRules + `python-import=re
eval-syntax:regex=import, assign, arith, compare
eval-import:regex=re
eval-attribute:regex=match
eval-timeout:regex=1s
`

// TestEvalResidualLimits: the payloads no check of the source and no budget of
// the guard can stop are stopped by the hard limits, the host survives, and the
// next evaluation works: a catastrophic regular expression (exponential
// backtracking inside the C engine) is killed by eval-timeout; bytes(10**8)
// under a 64 MiB address-space limit fails as a MemoryError, reported with
// Budget "memory". (A blocking C loop, sum(range(10**12)), is
// TestEvalHardLimits's.)
func TestEvalResidualLimits(t *testing.T) {
	sb := evalSandbox(t, residualRules)
	ctx := context.Background()
	next := func(what string) {
		t.Helper()
		if v, err := sb.Eval(ctx, "len(bytes(1000)) + 1", nil); err != nil || v != int64(1001) {
			t.Fatalf("after %s: %v, %v", what, v, err)
		}
	}
	next("the start")

	// The same pattern on a short subject: the grants suffice, the work is small.
	regex := func(n int) (map[string]any, error) {
		src := fmt.Sprintf("import re\nm = re.match('(a+)+$', 'a' * %d + 'b') is None\n", n)
		return sb.Exec(ctx, src, nil, pysandboxes.EvalProfile("regex"))
	}
	if ns, err := regex(8); err != nil || ns["m"] != true {
		t.Fatalf("short regex: %v, %v", ns, err)
	}
	t0 := time.Now()
	_, err := regex(40)
	if ie := interrupted(t, err, "eval-timeout"); ie.Limit != 1.0 {
		t.Errorf("regex: %+v after %v", ie, time.Since(t0))
	}
	next("the regex")

	// Under the same limit a small allocation works: the limit is what refuses
	// the large one.
	if v, err := sb.Eval(ctx, "len(bytes(10**6))", nil, pysandboxes.EvalMemory(64<<20)); err != nil || v != int64(1000000) {
		t.Fatalf("bytes(10**6) under 64 MiB: %v, %v", v, err)
	}
	_, err = sb.Eval(ctx, "len(bytes(10**8))", nil, pysandboxes.EvalMemory(64<<20))
	if ie := interrupted(t, err, "memory"); ie.Limit != int64(64<<20) {
		t.Errorf("memory: %+v", ie)
	}
	next("the memory limit")
}
