package pysandboxes

import (
	"context"
	"errors"
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
	return SupervisedNamespaces(req, stages, nil, nil)
}

// SupervisedNamespaces is SupervisedLaunch for the providers that confine with
// namespaces: when ns is not nil the supervisor runs in the new namespaces it
// describes and builds the sandbox's root (see supervise.Namespaces). With
// ns.Wait, ready runs once the namespaces exist and before the program starts,
// with the supervisor's pid (its /proc/<pid>/ns/* are the sandbox's): the program
// starts only if it returns nil, and the release function it returns (may be
// nil) runs at Cleanup, after the program's whole tree is gone.
func SupervisedNamespaces(req *Request, stages []supervise.Stage, ns *supervise.Namespaces,
	ready func(ctx context.Context, supervisor int) (release func() error, err error)) (*Launch, error) {
	return SupervisedView(req, stages, ns, nil, nil, ready)
}

// SupervisedView is SupervisedNamespaces with a host view (see supervise.View)
// that the supervisor makes first, and the descriptors it uses (view files:
// given to the supervisor, never to the program).
func SupervisedView(req *Request, stages []supervise.Stage, ns *supervise.Namespaces, view *supervise.View, viewFiles []*os.File,
	ready func(ctx context.Context, supervisor int) (release func() error, err error)) (*Launch, error) {
	spec := supervise.Spec{
		Path:       req.Path,
		Args:       req.Args,
		Rlimits:    req.Limits.rlimits(),
		Stages:     stages,
		Namespaces: ns,
		View:       view,
		ViewFiles:  viewFiles,
	}
	cmd, h, err := supervise.Command(spec, req.Helper, req.Env, req.Dir, req.ExtraFiles)
	if err != nil {
		return nil, err
	}
	var release func() error
	return &Launch{
		Cmd: cmd,
		Start: func(ctx context.Context) (int, error) {
			if ready == nil {
				return h.Start(ctx, cmd)
			}
			return h.StartReady(ctx, cmd, func(ctx context.Context, supervisor int) error {
				var err error
				release, err = ready(ctx, supervisor)
				return err
			})
		},
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
		Status: h.Status,
		Cleanup: func() error {
			err := h.Close()
			if release != nil {
				err = errors.Join(release(), err)
			}
			return err
		},
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
