package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// BenchmarkFirejailTrue runs /bin/true confined by firejail (supervisor,
// namespaces, whitelists, seccomp filter and the env(1) that fixes the
// environment included).
func BenchmarkFirejailTrue(b *testing.B) { providertest.BenchTrue(b, providerName) }

// BenchmarkFirejailPython runs python3 -S -c pass confined by firejail.
func BenchmarkFirejailPython(b *testing.B) { providertest.BenchPython(b, providerName) }

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) { providertest.BenchBareTrue(b) }
