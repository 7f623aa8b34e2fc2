package main

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The start-up budget (SPEC §8): python-sb -c pass <= 1.25x python3 -c pass.

func benchRun(b *testing.B, dir string, name string, args ...string) string {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "XDG_CACHE_HOME=" + cacheDir, "PYSANDBOXES_PYTHON=" + realPython}
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func BenchmarkPython3Pass(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		benchRun(b, dir, realPython, "-c", "pass")
	}
}

func BenchmarkPythonSBPass(b *testing.B) {
	dir := project(b, "os-sandbox=landlock\n", nil)
	benchRun(b, dir, binary, "-c", "pass") // warm the caches
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, dir, binary, "-c", "pass")
	}
}

func BenchmarkPythonSBPassSubprocess(b *testing.B) {
	dir := project(b, "os-sandbox=subprocess\n", nil)
	benchRun(b, dir, binary, "--accept-unenforced=all", "-c", "pass")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, dir, binary, "--accept-unenforced=all", "-c", "pass")
	}
}

// The hot open()/close() loop of an allowed file: guarded <= 1.5x unguarded. The
// loop times itself inside the interpreter; the metric is ns per open+close.
const openLoop = `import time
p = %q
for _ in range(2000): open(p).close()
t = time.perf_counter_ns()
for _ in range(20000): open(p).close()
print((time.perf_counter_ns() - t) // 20000)
`

func openLoopBench(b *testing.B, guarded bool) {
	dir := project(b, "os-sandbox=subprocess\npython-import=time\nexpose-ro=.\n", map[string]string{"f.txt": "x"})
	code := strings.Replace(openLoop, "%q", strconv.Quote(filepath.Join(dir, "f.txt")), 1)
	var total float64
	for i := 0; i < b.N; i++ {
		var out string
		if guarded {
			out = benchRun(b, dir, binary, "--accept-unenforced=all", "-c", code)
		} else {
			out = benchRun(b, dir, realPython, "-c", code)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		n, err := strconv.ParseFloat(lines[len(lines)-1], 64)
		if err != nil {
			b.Fatalf("output %q", out)
		}
		total += n
	}
	b.ReportMetric(total/float64(b.N), "ns/open")
}

func BenchmarkOpenLoopGuarded(b *testing.B)   { openLoopBench(b, true) }
func BenchmarkOpenLoopUnguarded(b *testing.B) { openLoopBench(b, false) }
