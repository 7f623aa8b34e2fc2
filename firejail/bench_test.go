package firejail_test

import (
	"context"
	"os/exec"
	"testing"
)

// BenchmarkFirejailTrue runs /bin/true confined by firejail (supervisor, namespaces,
// whitelists, seccomp filter and the env(1) that fixes the environment included).
func BenchmarkFirejailTrue(b *testing.B) {
	sb := sandbox(b, nil)
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirejailPython runs python3 -S -c pass confined by firejail.
func BenchmarkFirejailPython(b *testing.B) {
	sb := sandbox(b, nil)
	ctx := context.Background()
	py := python(b)
	for b.Loop() {
		if err := sb.Command(ctx, py, "-S", "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
