// Package prepare is the Compile/Prepare skeleton the built-in providers
// share: a provider compiles a policy once per sandbox (driver.Compiler), and
// its Prepare takes that compilation from the request (or compiles now,
// accepting nothing, for a request not made by a sandbox), logs the
// compilation's warnings once per sandbox, and then makes its own launch.
package prepare

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/pysandboxes/pysandboxes/driver"
)

// Compiled is a provider's compilation of one policy: a pointer type that
// holds the warnings to log once per sandbox.
type Compiled interface {
	comparable
	// Warnings returns the compilation's warnings and the Once that logs them
	// a single time.
	Warnings() ([]string, *sync.Once)
}

// Result is the return of a provider's Compile (driver.Compiler): nil and the
// error when compiling failed (never a typed nil in the interface), else the
// compilation.
func Result[C Compiled](c C, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Request returns what Prepare needs of a request: its compilation (made now
// by the provider's Compile, accepting nothing, when the request carries none
// of this provider's: a caller of the Provider interface alone) and its logger
// (slog.Default when the request has none). The compilation's warnings are
// logged at the first call for it, as "os-sandbox <name>: <warning>".
func Request[C Compiled](ctx context.Context, name string, req *driver.Request, p driver.Compiler) (C, *slog.Logger, error) {
	var zero C
	c, _ := req.Compiled.(C)
	if c == zero {
		v, err := p.Compile(ctx, req.Policy, 0)
		if err != nil {
			return zero, nil, err
		}
		if c, _ = v.(C); c == zero {
			return zero, nil, fmt.Errorf("os-sandbox %s: Compile returned %T, not %T", name, v, zero)
		}
	}
	logger := req.Logger
	if logger == nil {
		logger = slog.Default()
	}
	warnings, once := c.Warnings()
	once.Do(func() {
		for _, w := range warnings {
			logger.Warn("os-sandbox "+name+": "+w, "provider", name)
		}
	})
	return c, logger, nil
}
