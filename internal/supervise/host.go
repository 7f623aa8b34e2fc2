package supervise

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SelfHelper is the default helper: the running binary itself.
const SelfHelper = "/proc/self/exe"

// Command returns the supervisor command for spec, and the Handle that reads its
// reports. helper is the binary to run as the supervisor ("" means SelfHelper); env
// and dir are the program's environment and working directory (the supervisor runs
// in dir, with an empty environment of its own, and gives env to the program,
// duplicates removed as os/exec does). extra are the caller's extra files, passed
// to the program as descriptors 3, 4, ...
//
// The spec goes to the supervisor in the wire format (wire.go) through a memfd.
// A stage configuration that does not decode is a *StartError here: nothing
// starts.
//
// The caller sets stdio on the returned command and starts it with Start (below),
// never with the command's own Start, so that the parent-death signal is armed on a
// thread that stays alive.
func Command(spec Spec, helper string, env []string, dir string, extra []*os.File) (*exec.Cmd, *Handle, error) {
	return command(spec, helper, env, dir, extra, marker)
}

// command is Command with the supervisor's marker (markerGo runs the Go
// supervisor in a cgo build).
func command(spec Spec, helper string, env []string, dir string, extra []*os.File, mark string) (*exec.Cmd, *Handle, error) {
	if helper == "" {
		helper = SelfHelper
	}
	env, err := dedupEnv(env)
	if err != nil {
		return nil, nil, err
	}
	spec.ExtraFiles = len(extra)
	spec.StatusFD = 3 + len(extra)
	spec.HostPID = os.Getpid()
	wire, err := encodeWire(&spec, env)
	if err != nil {
		return nil, nil, err
	}
	sf, err := specFile(wire)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		sf.Close()
		return nil, nil, fmt.Errorf("supervise: status pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:       helper,
		Args:       []string{mark, version, strconv.Itoa(spec.StatusFD), strconv.Itoa(spec.StatusFD + 1)},
		Env:        []string{},
		Dir:        dir,
		ExtraFiles: append(append([]*os.File(nil), extra...), w, sf),
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: SignalHostDied,
		},
	}
	h := &Handle{r: r, w: w, spec: sf, br: bufio.NewReader(r), path: spec.Path}
	if ns := spec.Namespaces; ns != nil {
		// The lifeline: the supervisor reads the go-ahead from it, and its end
		// tells it that the host died (its parent's pid is invisible from its pid
		// namespace).
		lr, lw, err := os.Pipe()
		if err != nil {
			h.Close()
			return nil, nil, fmt.Errorf("supervise: lifeline pipe: %w", err)
		}
		h.lifeR, h.lifeW, h.wait = lr, lw, ns.Wait
		cmd.ExtraFiles = append(cmd.ExtraFiles, lr)
		// The working directory is the program's, in the new root (OpChdir): the
		// supervisor starts where the host is.
		cmd.Dir = ""
	}
	// The view's descriptors come last (encodeWire numbers them so).
	cmd.ExtraFiles = append(cmd.ExtraFiles, spec.ViewFiles...)
	return cmd, h, nil
}

// CloneFlags are the namespaces a supervisor of a spec with Namespaces makes.
const CloneFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
	syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP

// specFile returns a memfd holding wire.
func specFile(wire []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("pysandboxes-spec", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("supervise: spec file: %w", err)
	}
	f := os.NewFile(uintptr(fd), "pysandboxes-spec")
	if _, err := f.Write(wire); err != nil {
		f.Close()
		return nil, fmt.Errorf("supervise: spec file: %w", err)
	}
	return f, nil
}

// dedupEnv removes the duplicate variables of env, the last one winning, and
// refuses a NUL byte, as os/exec does with the environment of a command.
func dedupEnv(env []string) ([]string, error) {
	out := make([]string, 0, len(env))
	saw := make(map[string]bool, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		kv := env[i]
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errors.New("supervise: environment variable contains NUL")
		}
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			if kv != "" {
				out = append(out, kv)
			}
			continue
		}
		if saw[k] {
			continue
		}
		saw[k] = true
		out = append(out, kv)
	}
	slices.Reverse(out)
	return out, nil
}

// Handle reads the supervisor's reports: the program's pid once started, and its
// wait status once it ended.
type Handle struct {
	r, w *os.File
	spec *os.File // the spec file, until the supervisor started
	br   *bufio.Reader
	path string
	pid  int
	// With namespaces: the lifeline's ends (the host keeps the write end until
	// Close), and whether the supervisor waits for the go-ahead.
	lifeR, lifeW *os.File
	wait         bool
}

// Start starts the supervisor command and waits until it reports that the program
// runs (returning the program's pid) or could not be started (returning that
// error). The wait is bounded by ctx.
func (h *Handle) Start(ctx context.Context, cmd *exec.Cmd) (int, error) {
	return h.StartReady(ctx, cmd, nil)
}

// StartReady is Start for a spec whose Namespaces wait for the go-ahead: once
// the supervisor reports that the namespaces and the sandbox's root are ready, it
// calls ready with the pid of the supervisor that runs in them (pid 1 of the
// sandbox; /proc/<pid>/ns/* are the sandbox's namespaces), and lets the program
// start only when ready returns nil. An error
// of ready is returned, and the program never starts (the supervisor exits when
// the caller kills it or closes the Handle). ready may be nil.
func (h *Handle) StartReady(ctx context.Context, cmd *exec.Cmd, ready func(ctx context.Context, supervisor int) error) (int, error) {
	// The parent-death signal fires when the thread that forked the supervisor
	// exits: fork from a locked thread that goes back to the pool afterwards (the
	// runtime keeps pool threads alive), and let the supervisor ignore a signal
	// from a thread exit while the host itself lives.
	runtime.LockOSThread()
	err := cmd.Start()
	runtime.UnlockOSThread()
	h.w.Close()
	h.spec.Close()
	if h.lifeR != nil {
		h.lifeR.Close()
	}
	if err != nil {
		h.r.Close()
		return 0, err
	}
	if h.wait {
		line, err := h.report(ctx)
		if err != nil {
			return 0, err
		}
		sup, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "N "), "\n"))
		if !strings.HasPrefix(line, "N ") || err != nil || sup <= 0 {
			if err := h.parseStart(line); err != nil {
				return 0, err
			}
			return 0, &HelperError{Msg: "bad report " + strconv.Quote(line)}
		}
		if ready != nil {
			if err := ready(ctx, sup); err != nil {
				return 0, err
			}
		}
		if _, err := h.lifeW.Write([]byte{'G'}); err != nil {
			return 0, &HelperError{Msg: "cannot let the program start", Err: err}
		}
	}
	line, err := h.report(ctx)
	if err != nil {
		return 0, err
	}
	if err := h.parseStart(line); err != nil {
		return 0, err
	}
	return h.pid, nil
}

// report reads one report line, bounded by ctx.
func (h *Handle) report(ctx context.Context) (string, error) {
	stop := context.AfterFunc(ctx, func() { h.r.SetReadDeadline(time.Now()) })
	line, rerr := h.br.ReadString('\n')
	if !stop() {
		rerr = errors.Join(ctx.Err(), rerr)
	}
	h.r.SetReadDeadline(time.Time{})
	if rerr != nil {
		return "", &HelperError{Msg: "the supervisor did not report a start", Err: rerr}
	}
	return line, nil
}

// parseStart reads a start report: it sets the program's pid (and returns nil)
// for "S", and returns the error of any other.
func (h *Handle) parseStart(line string) error {
	kind, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	switch kind {
	case "S":
		pid, err := strconv.Atoi(rest)
		if err != nil || pid <= 0 {
			return &HelperError{Msg: "bad start report " + strconv.Quote(line)}
		}
		h.pid = pid
		return nil
	case "E":
		num, msg, _ := strings.Cut(rest, " ")
		n, _ := strconv.Atoi(num)
		return &StartError{Path: h.path, Msg: msg, Errno: syscall.Errno(n)}
	}
	return &HelperError{Msg: "bad report " + strconv.Quote(line)}
}

// Pid returns the program's pid (0 before Start succeeded).
func (h *Handle) Pid() int { return h.pid }

// Status reads the program's wait status after the supervisor exited.
func (h *Handle) Status() (syscall.WaitStatus, error) {
	defer h.r.Close()
	line, err := h.br.ReadString('\n')
	if err != nil {
		return 0, &HelperError{Msg: "the supervisor ended without reporting the program's status", Err: err}
	}
	kind, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	n, perr := strconv.ParseUint(rest, 10, 32)
	if kind != "X" || perr != nil {
		return 0, &HelperError{Msg: "bad status report " + strconv.Quote(line)}
	}
	return syscall.WaitStatus(uint32(n)), nil
}

// Close releases the handle's pipe (it may already be closed).
func (h *Handle) Close() error {
	h.w.Close()
	h.spec.Close()
	h.r.Close()
	if h.lifeR != nil {
		h.lifeR.Close()
		h.lifeW.Close()
	}
	return nil
}

// Terminate asks the supervisor to kill the program's whole tree and exit.
func Terminate(p *os.Process) error { return p.Signal(SignalTerminate) }

// StartError reports a program that the supervisor could not start, or a
// restriction it could not apply (the program then never ran).
type StartError struct {
	Path  string
	Msg   string
	Errno syscall.Errno
}

func (e *StartError) Error() string { return "start " + e.Path + ": " + e.Msg }

// Unwrap returns the errno, so errors.Is(err, fs.ErrNotExist) and the like work.
func (e *StartError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// HelperError reports a supervisor that misbehaved or died.
type HelperError struct {
	Msg string
	Err error
}

func (e *HelperError) Error() string {
	if e.Err != nil {
		return "supervisor: " + e.Msg + ": " + e.Err.Error()
	}
	return "supervisor: " + e.Msg
}

func (e *HelperError) Unwrap() error { return e.Err }
