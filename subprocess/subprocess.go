// Package subprocess provides the OS providers that confine nothing: subprocess
// runs the program as a plain child process under the supervisor (exactly the
// policy's environment, the resource limits, the whole process tree killed with
// the program, the context or the host), what learning mode uses; none runs it
// without any sandbox, with the host's environment, for debugging only.
// Importing the package registers both (package pysandboxes does).
package subprocess

import (
	"context"
	"os/exec"
	"syscall"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/launch"
)

func init() {
	driver.Register(subprocessProvider{})
	driver.Register(noneProvider{})
}

// subprocessProvider runs the program as a plain child process: no OS boundary, but
// the environment is exactly the policy's, the resource limits apply, and the whole
// process tree dies with the program, the context and the host (through the
// supervisor). It is what learning mode uses.
type subprocessProvider struct{}

func (subprocessProvider) Name() string { return "subprocess" }

func (subprocessProvider) Probe(context.Context) error { return nil }

func (subprocessProvider) Capabilities() driver.Capability {
	return driver.CapEnv | driver.CapResourceLimits | driver.CapUnprivileged
}

func (subprocessProvider) Prepare(_ context.Context, req *driver.Request) (*driver.Launch, error) {
	return launch.Supervised(req, launch.Options{})
}

// noneProvider runs the program without any sandbox, with the host's environment:
// for debugging only. New never chooses it unless it is named.
type noneProvider struct{}

func (noneProvider) Name() string                    { return "none" }
func (noneProvider) Probe(context.Context) error     { return nil }
func (noneProvider) Capabilities() driver.Capability { return 0 }

func (noneProvider) Prepare(_ context.Context, req *driver.Request) (*driver.Launch, error) {
	env := req.Env
	if env == nil {
		env = []string{}
	}
	cmd := &exec.Cmd{
		Path:        req.Path,
		Args:        req.Args,
		Env:         env,
		Dir:         req.Dir,
		ExtraFiles:  req.ExtraFiles,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	return &driver.Launch{Cmd: cmd}, nil
}
