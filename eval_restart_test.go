package pysandboxes_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// zygotePid finds the eval zygote among the descendants of the test process:
// the Python process whose parent is not one.
func zygotePid(t *testing.T) int {
	t.Helper()
	isPython := func(pid int) bool {
		b, _ := os.ReadFile("/proc/" + itoa(pid) + "/comm")
		return strings.HasPrefix(string(b), "python")
	}
	var walk func(pid int) int
	walk = func(pid int) int {
		for _, k := range childrenOf(pid) {
			if isPython(k) && !isPython(pid) {
				return k
			}
			if z := walk(k); z != 0 {
				return z
			}
		}
		return 0
	}
	z := walk(os.Getpid())
	if z == 0 {
		t.Fatal("no zygote process found")
	}
	return z
}

func itoa(n int) string {
	return strconv.Itoa(n)
}

// evalAfterCrash evaluates 1+1 once the zygote is known dead: the first try may
// still reach the dead zygote (an *EvalProcessError), the second must work.
func evalAfterCrash(t *testing.T, sb *pysandboxes.Sandbox) error {
	t.Helper()
	var err error
	for range 2 {
		var v any
		v, err = sb.Eval(context.Background(), "1+1", nil)
		if err == nil {
			if v != int64(2) {
				t.Fatalf("1+1 = %v", v)
			}
			return nil
		}
		var pe *pysandboxes.EvalProcessError
		if !errors.As(err, &pe) {
			return err
		}
	}
	return err
}

// TestEvalZygoteDeathRestarts: a zygote killed from outside is replaced at the
// next evaluation; past the restart policy's budget, evaluations fail at once
// with ErrRestartLimit.
func TestEvalZygoteDeathRestarts(t *testing.T) {
	sb := evalSandbox(t, calcRules, pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{
		Max: 1, Window: time.Hour, Backoff: 10 * time.Millisecond, Factor: 1, MaxBackoff: 10 * time.Millisecond}}))
	if _, err := sb.Eval(context.Background(), "1", nil); err != nil {
		t.Fatal(err)
	}
	z1 := zygotePid(t)
	syscall.Kill(z1, syscall.SIGKILL)
	waitGone(t, 5*time.Second, z1)
	if err := evalAfterCrash(t, sb); err != nil {
		t.Fatalf("after the first crash: %v", err)
	}
	z2 := zygotePid(t)
	if z2 == z1 {
		t.Fatal("the zygote was not replaced")
	}
	syscall.Kill(z2, syscall.SIGKILL)
	waitGone(t, 5*time.Second, z2)
	err := evalAfterCrash(t, sb)
	if !errors.Is(err, pysandboxes.ErrRestartLimit) {
		t.Errorf("after two crashes with Max 1: %v, want ErrRestartLimit", err)
	}
}
