//go:build !cgo

package seccomp

import (
	"errors"
	"strings"
	"testing"
)

// TestUnavailableWithoutCgo: a CGO_ENABLED=0 build compiles, and says why it
// cannot build filters.
func TestUnavailableWithoutCgo(t *testing.T) {
	err := Available()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available() = %v, want an error wrapping ErrUnavailable", err)
	}
	for _, want := range []string{"without cgo", "libseccomp", "CGO_ENABLED=1", "libseccomp-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Available() = %q, want it to mention %q", err, want)
		}
	}
	p, err := Build(Options{DenyMPTCP: true})
	if p != nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Build = %v, %v; want nil and ErrUnavailable", p, err)
	}
}
