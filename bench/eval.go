package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// evalBench measures the eval layer (Sandbox.Eval of "2+3*4" under a calculator
// profile) under each working provider: the latency of one evaluation on a warm
// zygote that has a process ready (evaluations spaced out), evaluations back to
// back with 1 caller (pool 1) and 2 callers (pool 2), and a fresh sandboxed
// interpreter per evaluation (no zygote); and, in the same run, a fresh
// `python -c` per evaluation with no sandbox at all, for comparison.
func evalBench(ctx context.Context, python string, n int) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pol, err := policy.Parse(ctx, "", []byte("eval-syntax=arith, compare\n"), &policy.Options{Logger: quiet})
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("Sandbox.Eval(\"2+3*4\"), %s; %d evaluations per row (after a warm-up); %s, %s\n\n", python, n, kernel(), host)
	fmt.Println("| configuration | callers | p50 ms | p99 ms | evals/s | p50 vs python -c |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	base, _, err := timeRuns(n, 1, 0, func() error { return exec.Command(python, "-c", "print(2+3*4)").Run() })
	if err != nil {
		return fmt.Errorf("%s -c: %w", python, err)
	}
	row := func(name string, callers int, lat []time.Duration, rate float64) {
		p50 := quantile(lat, 0.5)
		r := "-"
		if rate > 0 {
			r = fmt.Sprintf("%.0f", rate)
		}
		fmt.Printf("| %s | %d | %.2f | %.2f | %s | %.2fx |\n", name, callers, ms(p50), ms(quantile(lat, 0.99)), r,
			float64(p50)/float64(quantile(base, 0.5)))
	}
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" {
			continue
		}
		mk := func(opts ...pysandboxes.Option) (*pysandboxes.Sandbox, error) {
			o := []pysandboxes.Option{pysandboxes.WithProvider(p.Name()), pysandboxes.WithLogger(quiet), pysandboxes.WithPython(python)}
			o = append(o, accepting(p))
			return pysandboxes.New(ctx, pol, append(o, opts...)...)
		}
		eval := func(sb *pysandboxes.Sandbox) func() error {
			return func() error {
				v, err := sb.Eval(ctx, "2+3*4", nil)
				if err == nil && v != int64(14) {
					err = fmt.Errorf("2+3*4 = %v", v)
				}
				return err
			}
		}
		sb, err := mk()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: skipping Eval under %s: %v\n", p.Name(), err)
			continue
		}
		// Warm: a pause before each evaluation lets the zygote have a process
		// forked and warmed up.
		lat, _, err := timeRuns(n, 1, readyPause(p.Name()), eval(sb))
		if err != nil {
			sb.Close()
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		row(p.Name()+", warm zygote (process ready)", 1, lat, 0)
		lat, elapsed, err := timeRuns(n, 1, 0, eval(sb))
		sb.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		row(p.Name()+", back to back, pool 1", 1, lat, float64(n)/elapsed.Seconds())
		sb2, err := mk(pysandboxes.WithEval(pysandboxes.EvalConfig{Pool: 2}))
		if err != nil {
			return err
		}
		lat, elapsed, err = timeRuns(n, 2, 0, eval(sb2))
		sb2.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		row(p.Name()+", back to back, pool 2", 2, lat, float64(n)/elapsed.Seconds())
		sb3, err := mk(pysandboxes.WithEval(pysandboxes.EvalConfig{NoFork: true}))
		if err != nil {
			return err
		}
		m := max(n/10, 10)
		lat, elapsed, err = timeRuns(m, 1, 0, eval(sb3))
		sb3.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		row(p.Name()+fmt.Sprintf(", fresh interpreter per eval (no zygote; %d evals)", m), 1, lat, float64(m)/elapsed.Seconds())
	}
	row(python+" -c, no sandbox", 1, base, 0)
	return nil
}

// readyPause is the pause before each evaluation of the "warm zygote (process
// ready)" rows: longer than the preparation of the zygote's next process (a
// fork and a warm-up: a few milliseconds natively, tens under QEMU's TCG).
func readyPause(provider string) time.Duration {
	if provider == "qemu" {
		return 200 * time.Millisecond
	}
	return 50 * time.Millisecond
}

// timeRuns runs f n times from callers goroutines after 10 warm-up calls, each
// after a pause (not measured), and returns the latency of each call, the time
// all took, and the first error.
func timeRuns(n, callers int, pause time.Duration, f func() error) ([]time.Duration, time.Duration, error) {
	for range 10 {
		if err := f(); err != nil {
			return nil, 0, err
		}
	}
	lat := make([]time.Duration, n)
	var mu sync.Mutex
	next := 0
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if pause > 0 {
					time.Sleep(pause)
				}
				t := time.Now()
				err := f()
				lat[i] = time.Since(t)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					next = n
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, time.Since(t0), firstErr
}
