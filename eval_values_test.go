package pysandboxes_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/transport"
)

// TestEvalValuesAndNames: an expression's value comes back decoded; names go in
// with their types; a named profile is its own sub-language; Exec returns the
// names the code bound (not a function it defined).
func TestEvalValuesAndNames(t *testing.T) {
	sb := evalSandbox(t, calcRules+`eval-syntax:agent=arith, compare, assign, func, loop, subscript, conditional
eval-call:agent=len, range, sum, f
`)
	ctx := context.Background()
	v, err := sb.Eval(ctx, "2+3*4", nil)
	if err != nil || v != int64(14) {
		t.Fatalf("2+3*4 = %v, %v", v, err)
	}
	v, err = sb.Eval(ctx, "(7 / 2, 2 ** 70, 'a' < 'b', None)", nil)
	want := transport.Tuple{3.5, mustBig("1180591620717411303424"), true, nil}
	if err != nil || !transport.Equal(v, want) {
		t.Errorf("tuple = %v, %v", v, err)
	}
	rows := []any{int64(3), int64(1), int64(2)}
	v, err = sb.Eval(ctx, "sorted(r * 10 for r in rows)[:2]", map[string]any{"rows": rows}, pysandboxes.EvalProfile("rows"))
	if diff := cmp.Diff([]any{int64(10), int64(20)}, v); err != nil || diff != "" {
		t.Errorf("rows = %v, %v", v, err)
	}
	ns, err := sb.Exec(ctx, "def f(n):\n    return n * 2\ntotal = 0\nfor i in range(n):\n    total += f(i)\nlast = i",
		map[string]any{"n": 5}, pysandboxes.EvalProfile("agent"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"total": int64(20), "last": int64(4), "i": int64(4)}, ns); diff != "" {
		t.Errorf("Exec bound (-want +got):\n%s", diff)
	}
}

func mustBig(dec string) *big.Int {
	n, ok := new(big.Int).SetString(dec, 10)
	if !ok {
		panic(dec)
	}
	return n
}
