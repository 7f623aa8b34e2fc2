package netfilter

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSetupClose measures Setup then Close on a fresh sandbox namespace (its
// creation is not timed): lo only, a filter with the egress stack, and the same
// with a host-loopback forward (the API socket and one add_hostfwd).
func BenchmarkSetupClose(b *testing.B) {
	needRoot(b)
	cases := []struct {
		name  string
		rules []string
	}{
		{"loopback-only", nil},
		{"filter+egress", []string{"net=ALLOW|tcp|*|443|OUT", "net=DENY|tcp|10.0.0.0/8|*|OUT"}},
		{"filter+egress+forward", []string{"net=ALLOW|tcp|*|443|OUT", "net=ALLOW|tcp|127.0.0.1|" + strconv.Itoa(freePort(b)) + "|IN"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := compileRules(b, c.rules...)
			var setup, closing time.Duration
			for b.Loop() {
				b.StopTimer()
				sb := newSandbox(b)
				b.StartTimer()
				t0 := time.Now()
				s, err := f.Setup(context.Background(), sb.ns)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				setup += t1.Sub(t0)
				closing += time.Since(t1)
				b.StopTimer()
				sb.cmd.Process.Kill()
				sb.cmd.Wait()
				b.StartTimer()
			}
			b.ReportMetric(float64(setup.Microseconds())/float64(b.N)/1000, "setup-ms/op")
			b.ReportMetric(float64(closing.Microseconds())/float64(b.N)/1000, "close-ms/op")
		})
	}
}

// BenchmarkCompile measures the translation of a policy of 20 rules.
func BenchmarkCompile(b *testing.B) {
	var rules []string
	for i := range 10 {
		rules = append(rules, "net=ALLOW|tcp|10.1."+strconv.Itoa(i)+".0/24|80,443,8000-9000|OUT",
			"net=DENY|udp|10.2."+strconv.Itoa(i)+".7|*|OUT")
	}
	n, err := loadRules(b, rules...)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Compile(n); err != nil {
			b.Fatal(err)
		}
	}
}
