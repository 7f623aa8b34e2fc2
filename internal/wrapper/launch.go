package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hidefs"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/hostview"
	"github.com/pysandboxes/pysandboxes/internal/launch"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"golang.org/x/sys/unix"
)

// Programs checks the program's path and lists what the sandbox must show to
// run it: the program, and env(1) when the program starts through it (env:
// "" when it does not).
func Programs(tool, path, env string) ([]string, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: %q is not an absolute path", tool, path)
	}
	programs := []string{path}
	if env != "" {
		if strings.Contains(path, "=") {
			return nil, fmt.Errorf("%s: cannot start %q: the program is started through %s, which takes a path holding \"=\" for a variable", tool, path, env)
		}
		programs = append(programs, env)
	}
	return programs, nil
}

// View plans the file system of one run (package internal/hostview) for the
// programs. A directory the ignore= scan could not read fails it, unless the
// caller accepted CapHide: then it is logged.
func (c *Compiled) View(ctx context.Context, tool string, logger *slog.Logger, programs []string) (*hostview.View, error) {
	view, err := c.Planner.Plan(ctx, programs...)
	if err != nil {
		return nil, err
	}
	for _, se := range view.ScanErrors {
		if !c.Accepted.Has(driver.CapHide) {
			return nil, fmt.Errorf("%w (accept the capability %s to run with ignore= unenforced there)", se, driver.CapHide)
		}
		logger.Warn("os-sandbox "+tool+": "+se.Error()+" (accepted: not enforced there)", "provider", tool)
	}
	return view, nil
}

// StartFilters starts the ignore= filters of the directories Served (nil when
// there is none), for the unprivileged uid of package internal/hostid.
func (c *Compiled) StartFilters(logger *slog.Logger) (*hideview.Servers, error) {
	if len(c.Served) == 0 {
		return nil, nil
	}
	return hideview.Start(c.Served, hideview.Paths(c.Planner.Exposes), c.Planner.Ignores, hidefs.IDs{UID: hostid.UID, GID: hostid.GID}, 0, logger)
}

// Idmapped returns the view operations of a run for the unprivileged uid (with
// IDMap): the Mapped exposures idmapped to it, with each directory on the way
// to what view shows and to the working directory dir that it could not
// traverse, and the ignore= filters over their directories.
func (c *Compiled) Idmapped(view *hostview.View, dir string, filters *hideview.Servers) []supervise.ViewOp {
	var sources []string
	for _, b := range view.Binds {
		sources = append(sources, b.Path)
	}
	return filters.Into(hostid.Idmapped(c.Mapped, append(sources, dir), uint32(os.Geteuid()), uint32(os.Getegid())))
}

// IdentityStage is the supervisor's stage that makes the tool run for the
// unprivileged uid of package internal/hostid.
func IdentityStage() supervise.Stage {
	return supervise.Stage{Kind: supervise.StageSetIdentity, Identity: &supervise.Identity{UID: hostid.UID, GID: hostid.GID}}
}

// Memfd makes an anonymous file holding b, read from its start.
func Memfd(tool, name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", tool, name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %s: %w", tool, name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %s: %w", tool, name, err)
	}
	return f, nil
}

// FirstChild is the first child of process pid, or 0.
func FirstChild(pid int) int {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

// Run is the supervised run of a tool: what a provider adds to it.
type Run struct {
	// Tool is the request that starts the tool: its path, arguments,
	// environment and descriptors (Files among them).
	Tool *driver.Request
	// Options are the supervisor's stages and view.
	Options launch.Options
	// Filters are the ignore= filters of the run (nil: none): the supervisor
	// gets their descriptors, and they stop once the sandbox ended.
	Filters *hideview.Servers
	// Files are descriptors the tool receives: this process's copies are
	// closed once the tool started (it holds its own), or at Cleanup.
	Files []*os.File
	// Started, when set, runs once the tool started, before Start returns
	// (the program may wait for it): on an error the tool's tree is
	// terminated and Start fails.
	Started func(ctx context.Context, pid int) error
	// ProgramPid finds the program's host pid from the tool's (0: not known):
	// signals go to the program itself, never through the tool.
	ProgramPid func(tool int) int
	// Release, when set, runs at Cleanup, after the supervisor's: it releases
	// what the run held beyond Files.
	Release func() error
}

// Supervise prepares the run of the tool under the supervisor. The program's
// exit status keeps the signal that ended it (launch.SignalStatus: the tool
// reports it as an exit code). On an error, the filters are stopped and Files
// closed; the caller releases the rest.
func Supervise(r Run) (*driver.Launch, error) {
	var once sync.Once
	release := func() {
		once.Do(func() {
			for _, f := range r.Files {
				f.Close()
			}
		})
	}
	if r.Filters != nil {
		r.Options.ViewFiles = r.Filters.Files()
	}
	l, err := launch.Supervised(r.Tool, r.Options)
	if err != nil {
		r.Filters.Stop(0)
		release()
		return nil, err
	}
	r.Filters.Attach(l)
	var toolPid atomic.Int64
	start, terminate := l.Start, l.Terminate
	l.Start = func(ctx context.Context) (int, error) {
		pid, err := start(ctx)
		release() // the tool holds its own copies now
		toolPid.Store(int64(pid))
		if err != nil || r.Started == nil {
			return pid, err
		}
		if err := r.Started(ctx, pid); err != nil {
			_ = terminate()
			return 0, err
		}
		return pid, nil
	}
	signal := l.Signal
	l.Signal = func(sig os.Signal) error {
		if r.ProgramPid == nil {
			return signal(sig)
		}
		if p := r.ProgramPid(int(toolPid.Load())); p > 0 {
			if ss, ok := sig.(syscall.Signal); ok {
				return syscall.Kill(p, ss)
			}
		}
		return signal(sig)
	}
	status := l.Status
	l.Status = func() (syscall.WaitStatus, error) {
		ws, err := status()
		return launch.SignalStatus(ws), err
	}
	cleanup := l.Cleanup
	l.Cleanup = func() error {
		release()
		var err error
		if cleanup != nil {
			err = cleanup()
		}
		if r.Release != nil {
			err = errors.Join(err, r.Release())
		}
		return err
	}
	return l, nil
}
