package pysandboxes_test

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// The eval layer's speed: go test -run '^$' -bench Eval -benchtime 200x .
// p50-ms and p99-ms are the quantiles of the evaluations' latency; ns/op is the
// time per evaluation when they follow one another (1/throughput).

func reportQuantiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(f float64) float64 {
		return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

func benchEval(b *testing.B, sb *pysandboxes.Sandbox, pause time.Duration) {
	ctx := context.Background()
	for range 5 {
		if _, err := sb.Eval(ctx, "2+3*4", nil); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
		t0 := time.Now()
		v, err := sb.Eval(ctx, "2+3*4", nil)
		lat = append(lat, time.Since(t0))
		if err != nil || v != int64(14) {
			b.Fatal(v, err)
		}
	}
	b.StopTimer()
	reportQuantiles(b, lat)
}

// BenchmarkEvalWarm: Eval("2+3*4") on a warm zygote that has a process ready
// (a pause between evaluations lets it fork and warm the next one up).
func BenchmarkEvalWarm(b *testing.B) {
	benchEval(b, evalSandbox(b, calcRules), 50*time.Millisecond)
}

// BenchmarkEvalBackToBack: evaluations one after the other, one caller: each
// waits for the zygote to have a process ready.
func BenchmarkEvalBackToBack(b *testing.B) {
	benchEval(b, evalSandbox(b, calcRules), 0)
}

// BenchmarkEvalTwoCallers: two callers at once, a pool of 2.
func BenchmarkEvalTwoCallers(b *testing.B) {
	sb := evalSandbox(b, calcRules, pysandboxes.WithEval(pysandboxes.EvalConfig{Pool: 2}))
	ctx := context.Background()
	for range 5 {
		if _, err := sb.Eval(ctx, "2+3*4", nil); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next := 0
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= b.N {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				t0 := time.Now()
				_, err := sb.Eval(ctx, "2+3*4", nil)
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportQuantiles(b, lat)
}

// BenchmarkEvalFreshInterpreter: without the zygote, a fresh sandboxed
// interpreter per evaluation.
func BenchmarkEvalFreshInterpreter(b *testing.B) {
	benchEval(b, evalSandbox(b, calcRules, pysandboxes.WithEval(pysandboxes.EvalConfig{NoFork: true})), 0)
}

// BenchmarkEvalPython3C: for comparison, /usr/bin/python3 -c 'print(2+3*4)'
// with no sandbox and no guard at all.
func BenchmarkEvalPython3C(b *testing.B) {
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		t0 := time.Now()
		if err := exec.Command("/usr/bin/python3", "-c", "print(2+3*4)").Run(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportQuantiles(b, lat)
}
