// Package launch runs a provider's request under the supervisor (package
// internal/supervise): the resource limits applied, the program's whole
// process tree owned and killed with the program, the context or the host.
// The providers that confine from inside the program's own process (landlock)
// add their stages; those that confine with namespaces (unshare) add the
// namespaces and the root to build; those that run a sandboxing tool (bwrap,
// firejail) start the tool as the supervised program.
package launch

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"golang.org/x/sys/unix"
)

// Options are what a provider adds to the supervised launch.
type Options struct {
	// Stages are applied, in order, by the thread that starts the program.
	Stages []supervise.Stage
	// Namespaces, when not nil, are the new namespaces the supervisor runs in,
	// and the sandbox's root it builds (see supervise.Namespaces).
	Namespaces *supervise.Namespaces
	// View is the host view the supervisor makes first (see supervise.View),
	// and ViewFiles the descriptors it uses: given to the supervisor, never to
	// the program.
	View      *supervise.View
	ViewFiles []*os.File
	// Ready, with Namespaces.Wait, runs once the namespaces exist and before
	// the program starts, with the supervisor's pid (its /proc/<pid>/ns/* are
	// the sandbox's): the program starts only if it returns nil, and the
	// release function it returns (may be nil) runs at Cleanup, after the
	// program's whole tree is gone.
	Ready func(ctx context.Context, supervisor int) (release func() error, err error)
}

// Supervised prepares req to run under the supervisor.
func Supervised(req *driver.Request, o Options) (*driver.Launch, error) {
	spec := supervise.Spec{
		Path:       req.Path,
		Args:       req.Args,
		Rlimits:    Rlimits(req.Limits),
		Stages:     o.Stages,
		Namespaces: o.Namespaces,
		View:       o.View,
		ViewFiles:  o.ViewFiles,
	}
	cmd, h, err := supervise.Command(spec, req.Helper, req.Env, req.Dir, req.ExtraFiles)
	if err != nil {
		return nil, err
	}
	var release func() error
	ready := o.Ready
	return &driver.Launch{
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

// Rlimits returns the kernel resource limits of l, or nil when there is none.
func Rlimits(l driver.Limits) []supervise.Rlimit {
	var out []supervise.Rlimit
	add := func(res int, v uint64) {
		if v > 0 {
			out = append(out, supervise.Rlimit{Resource: res, Value: v})
		}
	}
	if l.CPUTime > 0 {
		// The soft limit raises SIGXCPU; the hard one, a second later, SIGKILL.
		secs := uint64((l.CPUTime + time.Second - 1) / time.Second)
		out = append(out, supervise.Rlimit{Resource: unix.RLIMIT_CPU, Value: secs, Hard: secs + 1})
	}
	add(unix.RLIMIT_AS, l.AddressSpace)
	add(unix.RLIMIT_NOFILE, l.OpenFiles)
	add(unix.RLIMIT_NPROC, l.Processes)
	add(unix.RLIMIT_FSIZE, l.FileSize)
	return out
}
