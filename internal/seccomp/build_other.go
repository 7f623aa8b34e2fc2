//go:build !(linux && cgo)

package seccomp

import (
	"fmt"
	"runtime"
)

// Available returns nil when filters can be built here: the binary was built with
// cgo, and libseccomp is present and works (it compiles a filter with every kind of
// rule). Otherwise its error wraps ErrUnavailable and says why.
func Available() error { return unavailable }

var unavailable = func() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: seccomp is a Linux feature (this is %s)", ErrUnavailable, runtime.GOOS)
	}
	return fmt.Errorf("%w: built without cgo: seccomp filters need libseccomp; rebuild with CGO_ENABLED=1 and libseccomp-dev installed", ErrUnavailable)
}()

// Build compiles the filter for o. The filter is for the native architecture;
// a system call of any other ABI kills the process. The filter of each Options is
// compiled once per process (about a millisecond) and then reused.
//
// In this build it always fails with the error of Available.
func Build(Options) (*Program, error) { return nil, unavailable }
