package prepare

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/needs"
)

// Core is what a provider keeps for its life: what its probe found (probed
// once, at first use), and the Python interpreters' directories, cached for
// every sandbox. Its zero value is ready to use.
type Core[H any] struct {
	once  sync.Once
	state H
	// Interps caches the Python interpreters' directories for every sandbox.
	Interps needs.Interpreters
}

// Host returns what probe finds, running it at the first call only.
func (c *Core[H]) Host(probe func() H) H {
	c.once.Do(func() { c.state = probe() })
	return c.state
}

// Compile is a provider's Compile (driver.Compiler): the probe's error
// (hostErr) when the provider cannot run here, else what compile makes (never
// a typed nil: Result).
func Compile[C Compiled](hostErr error, compile func() (C, error)) (any, error) {
	if hostErr != nil {
		return nil, hostErr
	}
	return Result(compile())
}

// Prepare is a provider's Prepare: the probe's error (hostErr) when the
// provider cannot run here; else the request's compilation (made now when the
// request carries none: Request) and the launch that launch makes of it.
func Prepare[C Compiled](ctx context.Context, name string, req *driver.Request, p driver.Compiler, hostErr error, launch func(c C, logger *slog.Logger) (*driver.Launch, error)) (*driver.Launch, error) {
	if hostErr != nil {
		return nil, hostErr
	}
	c, logger, err := Request[C](ctx, name, req, p)
	if err != nil {
		return nil, err
	}
	return launch(c, logger)
}

// WorkDir is the program's working directory on the host: dir, or this
// process's ("/" when it has none).
func WorkDir(dir string) string {
	if dir != "" {
		return dir
	}
	if wd, err := os.Getwd(); err == nil {
		return wd
	}
	return "/"
}

// RealWorkDir is WorkDir(dir) made absolute, with its symbolic links resolved
// (left as it is when they cannot be).
func RealWorkDir(dir string) string {
	dir = WorkDir(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}
