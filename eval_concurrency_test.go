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

// TestEvalPoolRunsTwoAtOnce: with WithEval(EvalConfig{Pool: 2}), a short evaluation sent while
// a long one is blocked in C ends first; many callers at once all get their own
// answers.
func TestEvalPoolRunsTwoAtOnce(t *testing.T) {
	sb := evalSandbox(t, limitRules+"eval-timeout:long=3s\neval-syntax:long=arith\neval-call:long=sum, range\n", pysandboxes.WithEval(pysandboxes.EvalConfig{Pool: 2}))
	ctx := context.Background()
	if _, err := sb.Eval(ctx, "0", nil); err != nil {
		t.Fatal(err)
	}
	long := make(chan error, 1)
	go func() {
		_, err := sb.Eval(ctx, "sum(range(10**12))", nil, pysandboxes.EvalProfile("long"))
		long <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if v, err := sb.Eval(ctx, "6*7", nil); err != nil || v != int64(42) {
		t.Fatalf("short: %v, %v", v, err)
	}
	select {
	case err := <-long:
		t.Fatalf("the long evaluation ended (%v) before the short one: they did not run at once", err)
	default:
	}
	var ie *evalguard.InterruptedError
	if err := <-long; !errors.As(err, &ie) || ie.Budget != "eval-timeout" {
		t.Errorf("long: %v", err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				n := g*100 + i
				v, err := sb.Eval(ctx, "n * 2", map[string]any{"n": n})
				if err != nil || v != int64(2*n) {
					errs <- fmt.Errorf("caller %d, eval %d: %v, %v", g, i, v, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEval100ConcurrentEvaluations: 100 callers call Eval at the same moment on
// a sandbox of two processes; each gets its own answer, and after Close no
// process, descriptor or goroutine is left.
func TestEval100ConcurrentEvaluations(t *testing.T) {
	ctx := context.Background()
	warm := evalSandbox(t, limitRules, pysandboxes.WithEval(pysandboxes.EvalConfig{Pool: 2}))
	if _, err := warm.Eval(ctx, "1", nil); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	time.Sleep(100 * time.Millisecond)
	beforeFDs := openFDs(t)
	beforeG := runtime.NumGoroutine()

	sb := evalSandbox(t, limitRules, pysandboxes.WithEval(pysandboxes.EvalConfig{Pool: 2}))
	const n = 100
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := sb.Eval(ctx, "i * i + len(bytes(i))", map[string]any{"i": i})
			if err != nil || v != int64(i*i+i) {
				errs <- fmt.Errorf("caller %d: %v, %v", i, v, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
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
}
