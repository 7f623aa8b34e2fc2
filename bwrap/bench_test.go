package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// BenchmarkBwrapTrue runs /bin/true confined by bwrap (supervisor, namespaces,
// binds, seccomp filter and the env(1) that fixes PWD included).
func BenchmarkBwrapTrue(b *testing.B) { providertest.BenchTrue(b, providerName) }

// BenchmarkBwrapPython runs python3 -S -c pass confined by bwrap.
func BenchmarkBwrapPython(b *testing.B) { providertest.BenchPython(b, providerName) }

// BenchmarkBareTrue is the reference: a bare exec of /bin/true.
func BenchmarkBareTrue(b *testing.B) { providertest.BenchBareTrue(b) }
