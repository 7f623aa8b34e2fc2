package pysandboxes_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// TestCallNoLeaksAfter1000Calls makes a thousand calls (some failing, some
// timing out so that their worker is replaced, some killing their worker),
// then closes the sandbox, and checks that no descriptor, child process,
// goroutine or temporary file is left behind. It runs once, for the subprocess
// provider.
func TestCallNoLeaksAfter1000Calls(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx := context.Background()
	// Warm up: the interpreter's description and the layer's code are cached,
	// lazily opened descriptors are counted in both.
	warm := callSandbox(t, "subprocess", "")
	mustCall(t, warm, "callmod:noop")
	warm.Close()
	time.Sleep(100 * time.Millisecond)
	beforeFDs := openFDs(t)
	beforeG := runtime.NumGoroutine()

	sb := callSandbox(t, "subprocess", "", quickRestarts, pysandboxes.WithCall(pysandboxes.CallConfig{Workers: 2}))
	for i := range n {
		switch {
		case i%250 == 125:
			_, err := sb.CallWith(ctx, "callmod:sleep", pysandboxes.CallOptions{Timeout: 50 * time.Millisecond}, 10)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("call %d: %v", i, err)
			}
		case i%250 == 200:
			if _, err := sb.Call(ctx, "callmod:crash"); !errors.Is(err, pysandboxes.ErrWorkerExited) {
				t.Fatalf("call %d: %v", i, err)
			}
		case i%10 == 3:
			if _, err := sb.Call(ctx, "callmod:boom", "x"); err == nil {
				t.Fatalf("call %d did not fail", i)
			}
		default:
			if v, err := sb.Call(ctx, "callmod:add", i, 1); err != nil || v != int64(i+1) {
				t.Fatalf("call %d: %v, %v", i, v, err)
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
		t.Errorf("descriptors: %d before, %d after %d calls", beforeFDs, after, n)
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
