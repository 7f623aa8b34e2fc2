package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	if len(os.Args) >= 3 && os.Args[0] == marker {
		os.Exit(helperMain(os.Args[1], os.Args[2]))
	}
}

// exitHelperFailure is the supervisor's exit code when it could not start the
// program (the reason is reported over the status pipe).
const exitHelperFailure = 127

// forwarded are the signals the supervisor passes on to the program.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGALRM}

func helperMain(ver, encoded string) int {
	// Until the status pipe is known, the only way to complain is stderr.
	if ver != version {
		fmt.Fprintf(os.Stderr, "pysandboxes supervisor: protocol %q, want %q (host and helper binaries differ)\n", ver, version)
		return exitHelperFailure
	}
	var spec Spec
	if err := json.Unmarshal([]byte(encoded), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "pysandboxes supervisor: bad spec: %v\n", err)
		return exitHelperFailure
	}
	status := os.NewFile(uintptr(spec.StatusFD), "status")
	if status == nil {
		fmt.Fprintln(os.Stderr, "pysandboxes supervisor: no status descriptor")
		return exitHelperFailure
	}
	syscall.CloseOnExec(spec.StatusFD)
	h := &helper{spec: &spec, status: status}
	return h.run()
}

type helper struct {
	spec       *Spec
	status     *os.File
	pid        int  // the program
	restricted bool // a stage touched the starting thread
}

func (h *helper) report(format string, args ...any) {
	fmt.Fprintf(h.status, format+"\n", args...)
}

func (h *helper) fail(err error) int {
	var errno syscall.Errno
	msg := err.Error()
	var pe *os.PathError
	if errors.As(err, &pe) && errors.As(err, &errno) {
		msg = errno.Error() // the host names the path itself
	} else if !errors.As(err, &errno) {
		errno = 0
	}
	h.report("E %d %s", int(errno), strings.ReplaceAll(msg, "\n", " "))
	return exitHelperFailure
}

func (h *helper) run() int {
	// The host may have died before the parent-death signal was armed.
	if os.Getppid() != h.spec.HostPID {
		return h.fail(errors.New("the host process is gone"))
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return h.fail(fmt.Errorf("cannot become a child subreaper: %w", err))
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{SignalHostDied, SignalTerminate}, forwarded...)...)

	files := make([]uintptr, 3+h.spec.ExtraFiles)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := h.startConfined(files)
	if err != nil {
		return h.fail(err)
	}
	h.pid = pid
	h.report("S %d", h.pid)

	exited := make(chan syscall.WaitStatus, 1)
	gone := make(chan struct{})
	go h.reap(exited, gone)

	var ws syscall.WaitStatus
	done := false
	for !done {
		select {
		case ws = <-exited:
			done = true
		case s := <-sigs:
			switch s {
			case SignalHostDied:
				if os.Getppid() == h.spec.HostPID {
					continue // a host thread ended, not the host
				}
				h.killTree(gone)
			case SignalTerminate:
				h.killTree(gone)
			default:
				_ = syscall.Kill(h.pid, s.(syscall.Signal))
			}
		}
	}
	// The program is gone: nothing it started may outlive it.
	h.killTree(gone)
	<-gone
	h.report("X %d", uint32(ws))
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return exitHelperFailure
}

// startConfined applies the limits and the stages to a thread of its own and
// starts the program from it, so the program inherits them. That thread is never
// given back to the runtime: it would carry the restrictions to other goroutines,
// and its exit would fire the program's parent-death signal (which the kernel ties
// to the forking thread). It stays parked until the supervisor exits.
func (h *helper) startConfined(files []uintptr) (int, error) {
	type result struct {
		pid int
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		pid, err := h.confineAndStart(files)
		res <- result{pid, err}
		if err == nil || h.restricted {
			select {} // park the restricted thread for the supervisor's lifetime
		}
		runtime.UnlockOSThread()
	}()
	r := <-res
	return r.pid, r.err
}

// confineAndStart applies the stages to the calling thread, then forks and executes
// the program from it. syscall.ForkExec is used rather than os.StartProcess: the
// supervisor waits with wait4 itself and needs no pidfd (whose first use costs os
// an extra probe fork).
//
// Resource limits are not set on the supervisor (an address-space limit below what
// its runtime already maps would make any new thread fail): the program starts
// traced, stops at its first instruction after exec, gets its limits with prlimit,
// and is released before it has run any code.
func (h *helper) confineAndStart(files []uintptr) (int, error) {
	for _, st := range h.spec.Stages {
		h.restricted = true
		if err := applyStage(st); err != nil {
			return 0, fmt.Errorf("cannot apply %s: %w", st.Kind, err)
		}
	}
	stop := len(h.spec.Rlimits) > 0
	pid, err := syscall.ForkExec(h.spec.Path, h.spec.Args, &syscall.ProcAttr{
		Env:   syscall.Environ(),
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Ptrace: stop},
	})
	if err != nil {
		return 0, &os.PathError{Op: "fork/exec", Path: h.spec.Path, Err: err}
	}
	if stop {
		if err := h.limit(pid); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, unix.WALL, nil)
			return 0, err
		}
	}
	return pid, nil
}

// limit waits for the traced program's stop after exec, sets its resource limits,
// and lets it go. It runs on the thread that forked the program (its tracer).
func (h *helper) limit(pid int) error {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("waiting for the program to stop after exec: %w", err)
		}
		break
	}
	if !ws.Stopped() {
		return fmt.Errorf("the program did not stop after exec (status %#x)", uint32(ws))
	}
	for _, l := range h.spec.Rlimits {
		lim := unix.Rlimit{Cur: l.Value, Max: max(l.Value, l.Hard)}
		if err := unix.Prlimit(pid, l.Resource, &lim, nil); err != nil {
			return fmt.Errorf("cannot set resource limit %d to %d: %w", l.Resource, l.Value, err)
		}
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return fmt.Errorf("cannot release the program after setting its limits: %w", err)
	}
	return nil
}

// reap waits for every child (the program and the orphans re-parented to the
// supervisor) until none is left, reporting the program's own status.
func (h *helper) reap(exited chan<- syscall.WaitStatus, gone chan<- struct{}) {
	defer close(gone)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no descendant is left
			return
		}
		if pid == h.pid && (ws.Exited() || ws.Signaled()) {
			exited <- ws
		}
	}
}
