package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// callBench measures partial mode (Sandbox.Call): the round trip of a no-op call
// on a warm worker (p50, p90, p99), then calls per second with 1, 2 and 4
// callers served by 1 and by 2 workers, under each working provider.
func callBench(ctx context.Context, python string, n int) error {
	dir, err := os.MkdirTemp("", "pysandboxes-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "benchmod.py"), []byte("def noop():\n    return None\n"), 0o644); err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	host, _ := os.Hostname()
	fmt.Printf("Sandbox.Call of a no-op function (benchmod:noop), %s; %d calls per row; %s, %s\n\n", python, n, kernel(), host)
	fmt.Println("| provider | workers | callers | p50 ms | p90 ms | p99 ms | calls/s |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, p := range pysandboxes.Providers() {
		if p.Name() == "none" {
			continue
		}
		for _, workers := range []int{1, 2} {
			pol, err := policy.NewBuilder().ExposeRO(dir).Build(ctx, nil)
			if err != nil {
				return err
			}
			opts := []pysandboxes.Option{pysandboxes.WithProvider(p.Name()), pysandboxes.WithLogger(quiet),
				pysandboxes.WithPython(python), pysandboxes.WithCall(pysandboxes.CallConfig{PythonPath: []string{dir}}), pysandboxes.WithCall(pysandboxes.CallConfig{Workers: workers}),
				pysandboxes.WithCall(pysandboxes.CallConfig{Eager: true})}
			opts = append(opts, accepting(p))
			sb, err := pysandboxes.New(ctx, pol, opts...)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: skipping Call under %s: %v\n", p.Name(), err)
				break
			}
			for _, callers := range []int{1, 2, 4} {
				if callers < workers {
					continue
				}
				lat, elapsed, err := callRound(ctx, sb, n, callers)
				if err != nil {
					sb.Close()
					return fmt.Errorf("%s: %w", p.Name(), err)
				}
				fmt.Printf("| %s | %d | %d | %.3f | %.3f | %.3f | %.0f |\n", p.Name(), workers, callers,
					ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)), ms(quantile(lat, 0.99)), float64(n)/elapsed.Seconds())
			}
			sb.Close()
		}
	}
	return nil
}

// callRound makes n calls from callers goroutines after a warm-up, and returns
// the latency of each and the time all took.
func callRound(ctx context.Context, sb *pysandboxes.Sandbox, n, callers int) ([]time.Duration, time.Duration, error) {
	for range 50 {
		if _, err := sb.Call(ctx, "benchmod:noop"); err != nil {
			return nil, 0, err
		}
	}
	lat := make([]time.Duration, n)
	var next int
	var mu sync.Mutex
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
				t := time.Now()
				_, err := sb.Call(ctx, "benchmod:noop")
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
