package pysandboxes

import (
	"context"
	"os"
	"os/exec"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

func init() {
	Register(subprocessProvider{})
	Register(noneProvider{})
}

// subprocessProvider runs the program as a plain child process: no OS boundary, but
// the environment is exactly the policy's, the resource limits apply, and the whole
// process tree dies with the program, the context and the host (through the
// supervisor). It is what learning mode uses.
type subprocessProvider struct{}

func (subprocessProvider) Name() string { return "subprocess" }

func (subprocessProvider) Probe(context.Context) error { return nil }

func (subprocessProvider) Capabilities() Capability {
	return CapEnv | CapResourceLimits | CapUnprivileged
}

func (subprocessProvider) Prepare(_ context.Context, req *Request) (*Launch, error) {
	return SupervisedLaunch(req, nil)
}

// SupervisedLaunch prepares req to run under the supervisor (see package
// internal/supervise): resource limits applied, the process tree owned and killed
// with the program, the context or the host. Providers that confine the program
// from inside its own process (such as landlock) add their stages.
func SupervisedLaunch(req *Request, stages []supervise.Stage) (*Launch, error) {
	spec := supervise.Spec{
		Path:    req.Path,
		Args:    req.Args,
		Rlimits: req.Limits.rlimits(),
		Stages:  stages,
	}
	cmd, h, err := supervise.Command(spec, req.Helper, req.Env, req.Dir, req.ExtraFiles)
	if err != nil {
		return nil, err
	}
	return &Launch{
		Cmd:   cmd,
		Start: func(ctx context.Context) (int, error) { return h.Start(ctx, cmd) },
		Terminate: func() error {
			if cmd.Process == nil {
				return os.ErrProcessDone
			}
			return supervise.Terminate(cmd.Process)
		},
		Signal: func(sig os.Signal) error {
			// The supervisor forwards ordinary signals to the program.
			if s, ok := sig.(syscall.Signal); ok && (s == syscall.SIGKILL || s == syscall.SIGSTOP) {
				return syscall.Kill(h.Pid(), s)
			}
			return cmd.Process.Signal(sig)
		},
		Status:  h.Status,
		Cleanup: h.Close,
	}, nil
}

// noneProvider runs the program without any sandbox, with the host's environment:
// for debugging only. New never chooses it unless it is named.
type noneProvider struct{}

func (noneProvider) Name() string                { return "none" }
func (noneProvider) Probe(context.Context) error { return nil }
func (noneProvider) Capabilities() Capability    { return 0 }

func (noneProvider) Prepare(_ context.Context, req *Request) (*Launch, error) {
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
	return &Launch{Cmd: cmd}, nil
}
