package pysandboxes_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/evalguard"
)

// TestEvalNoLeaksAfter200Evaluations makes 200 evaluations (values, rejected
// sources, exceptions, timeouts that kill a process), closes the sandbox, and
// checks that no process, descriptor, goroutine or temporary file is left.
func TestEvalNoLeaksAfter200Evaluations(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx := context.Background()
	warm := evalSandbox(t, limitRules)
	if _, err := warm.Eval(ctx, "1", nil); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	time.Sleep(100 * time.Millisecond)
	beforeFDs := openFDs(t)
	beforeG := runtime.NumGoroutine()

	sb := evalSandbox(t, limitRules+"eval-timeout:short=100ms\neval-syntax:short=arith\neval-call:short=sum, range\n")
	for i := range 200 {
		switch {
		case i%50 == 25:
			_, err := sb.Eval(ctx, "sum(range(10**12))", nil, evalProfile("short"))
			var ie *evalguard.InterruptedError
			if !errors.As(err, &ie) {
				t.Fatalf("eval %d: %v", i, err)
			}
		case i%10 == 3:
			if _, err := sb.Eval(ctx, "().__class__", nil); err == nil {
				t.Fatalf("eval %d was not rejected", i)
			}
		case i%10 == 7:
			if _, err := sb.Eval(ctx, "1 // 0", nil); err == nil {
				t.Fatalf("eval %d did not fail", i)
			}
		default:
			if v, err := sb.Eval(ctx, "i + 1", map[string]any{"i": i}); err != nil || v != int64(i+1) {
				t.Fatalf("eval %d: %v, %v", i, v, err)
			}
		}
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if kids := childrenOf(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if after := openFDs(t); after != beforeFDs {
		t.Errorf("descriptors: %d before, %d after", beforeFDs, after)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > beforeG && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > beforeG {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after\n%s", beforeG, g, buf[:runtime.Stack(buf, true)])
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}
