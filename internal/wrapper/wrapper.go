// Package wrapper is the core of the wrapper providers: those that confine a
// program by running a sandboxing tool around it (bwrap, firejail), the tool
// itself started as the supervised program (package internal/launch).
//
// What is the same for every such tool lives here, in the order a provider uses
// it:
//
//   - the provider's skeleton: what it keeps for its life (Core: the probe,
//     made once, and the interpreters' cache), and its Compile and Prepare
//     around its own compile and launch (Compile, Prepare);
//   - the probe's steps: finding the binary (Lookup), the options its --help
//     lists (Help.Options), whether the program can run for an unprivileged
//     host uid when the host is root (Identity), whether the ignore= filter can
//     serve the exposed directories (Hide);
//   - the compile pipeline (Compiled.Compile): the tool's own parameters, the
//     network plan (PlanNetwork: what net= rules make of internal/netfilter),
//     env(1), the exposures the tool shows of its own (/proc, /dev), the
//     Landlock listen rules, the file-system view plan (package
//     internal/hostview) with the files a network needs, and the directories
//     the ignore= filter serves (package internal/hideview);
//   - the table check of the <provider>.<option>= lines (CheckParams, Flag);
//   - the launch flow: the program and env(1) (Programs), the view of one
//     program (Compiled.View), the filter and idmapped view of a root host
//     (Compiled.StartFilters, Compiled.Idmapped), and the supervised run of the
//     tool with its descriptors, the program's signals and status, and the
//     release of what the run held (Supervise).
//
// What a tool does its own way stays in its provider, explicit: how it spells
// its command line, how it takes the network (bwrap sets the filter up in the
// namespace it made, while it holds the program; firejail joins a named
// namespace set up before it starts), the order of the supervisor's stages,
// its Details and Capabilities.
package wrapper

import (
	"context"
	"log/slog"
	"sync"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
)

// Core is what a wrapper provider keeps for its life: what its probe found
// (probed once), and the Python interpreters' directories, cached for every
// sandbox. Its zero value is ready to use.
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

// Compile is the Compile of a wrapper provider (driver.Compiler): the probe's
// error (hostErr) when the tool cannot run here, else what compile makes
// (never a typed nil).
func Compile[C prepare.Compiled](hostErr error, compile func() (C, error)) (any, error) {
	if hostErr != nil {
		return nil, hostErr
	}
	return prepare.Result(compile())
}

// Prepare is the Prepare of a wrapper provider: the probe's error (hostErr)
// when the tool cannot run here; else the request's compilation (made now when
// the request carries none: package prepare) and the launch that launch makes
// of it.
func Prepare[C prepare.Compiled](ctx context.Context, name string, req *driver.Request, p driver.Compiler, hostErr error, launch func(c C, logger *slog.Logger) (*driver.Launch, error)) (*driver.Launch, error) {
	if hostErr != nil {
		return nil, hostErr
	}
	c, logger, err := prepare.Request[C](ctx, name, req, p)
	if err != nil {
		return nil, err
	}
	return launch(c, logger)
}
