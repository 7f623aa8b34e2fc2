package pysandboxes_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// BenchmarkCallNoop: the round trip of a call of a no-op function on a warm
// worker (landlock, Python layer on); reports the median (SPEC §8: p50 <= 1 ms).
func BenchmarkCallNoop(b *testing.B) {
	for _, provider := range []string{"landlock", "subprocess"} {
		b.Run(provider, func(b *testing.B) {
			sb := callSandbox(b, provider, "")
			ctx := context.Background()
			mustCall(b, sb, "callmod:noop")
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t := time.Now()
				if _, err := sb.Call(ctx, "callmod:noop"); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkCallParallel: throughput of parallel callers on pools of 1, 2 and 4
// workers (landlock).
func BenchmarkCallParallel(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			sb := callSandbox(b, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Workers: workers}))
			if err := sb.StartWorkers(context.Background()); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetParallelism(4)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := sb.Call(ctx, "callmod:add", 1, 2); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkCallValues: a call carrying and returning a 100-element dict.
func BenchmarkCallValues(b *testing.B) {
	sb := callSandbox(b, "landlock", "")
	ctx := context.Background()
	arg := map[string]any{}
	for i := range 100 {
		arg[fmt.Sprint("key", i)] = []any{i, "value", 1.5}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := sb.Call(ctx, "callmod:ident", arg); err != nil {
			b.Fatal(err)
		}
	}
}
