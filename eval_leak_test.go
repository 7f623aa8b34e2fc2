package pysandboxes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
)

// TestEvalNoLeaksAfter1000Evaluations makes 1,000 evaluations (values, rejected
// sources, exceptions, timeouts that kill a process), two callers at a time on a
// pool of two processes, closes the sandbox, and checks that no process,
// descriptor, goroutine or temporary file is left. Each evaluation costs a fork
// and a warm-up of the zygote: the 1,000 take about a minute of processor time
// (30-70 s of wall clock on 2 cores, depending on the load); -short makes 200.
func TestEvalNoLeaksAfter1000Evaluations(t *testing.T) {
	evaluations := 1000
	if testing.Short() {
		evaluations = 200
	}
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

	sb := evalSandbox(t, limitRules+"eval-timeout:short=100ms\neval-syntax:short=arith\neval-call:short=sum, range\n", pysandboxes.WithEval(pysandboxes.EvalConfig{Pool: 2}))
	one := func(i int) error {
		switch {
		case i%50 == 25:
			_, err := sb.Eval(ctx, "sum(range(10**12))", nil, evalProfile("short"))
			var ie *evalguard.InterruptedError
			if !errors.As(err, &ie) {
				return fmt.Errorf("eval %d: %v", i, err)
			}
		case i%10 == 3:
			if _, err := sb.Eval(ctx, "().__class__", nil); err == nil {
				return fmt.Errorf("eval %d was not rejected", i)
			}
		case i%10 == 7:
			if _, err := sb.Eval(ctx, "1 // 0", nil); err == nil {
				return fmt.Errorf("eval %d did not fail", i)
			}
		default:
			if v, err := sb.Eval(ctx, "i + 1", map[string]any{"i": i}); err != nil || v != int64(i+1) {
				return fmt.Errorf("eval %d: %v, %v", i, v, err)
			}
		}
		return nil
	}
	// Two callers on a pool of two processes, evaluations 0, 2, 4... and 1, 3, 5...
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < evaluations; i += 2 {
				if errs[c] = one(i); errs[c] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
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
