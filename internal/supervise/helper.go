package supervise

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	// In a cgo build the C supervisor has already taken a process with marker over
	// (and never returned): only markerGo reaches this point there.
	if len(os.Args) >= 3 && (os.Args[0] == marker || os.Args[0] == markerGo || os.Args[0] == markerGoNS) {
		os.Exit(helperMain(os.Args[1:], os.Args[0] == markerGoNS))
	}
}

// exitHelperFailure is the supervisor's exit code when it could not start the
// program (the reason is reported over the status pipe).
const exitHelperFailure = 127

// forwarded are the signals the supervisor passes on to the program.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGALRM}

// helperMain is the Go supervisor: args are the version, the status descriptor
// and the spec descriptor. It does what supervisor_linux.c does, with the same
// reports and messages. inner is set in the supervisor that runs in the
// namespaces of a spec (started by the Go supervisor outside them).
func helperMain(args []string, inner bool) int {
	// Until the status pipe is known, the only way to complain is stderr.
	if args[0] != version {
		fmt.Fprintf(os.Stderr, "pysandboxes supervisor: protocol \"%s\", want \"%s\" (host and helper binaries differ)\n", args[0], version)
		return exitHelperFailure
	}
	statusFD, specFD := -1, -1
	if len(args) == 3 {
		statusFD, specFD = parseFD(args[1]), parseFD(args[2])
	}
	if statusFD < 0 || specFD < 0 {
		fmt.Fprintln(os.Stderr, "pysandboxes supervisor: bad arguments")
		return exitHelperFailure
	}
	if _, err := unix.FcntlInt(uintptr(statusFD), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "pysandboxes supervisor: no status descriptor")
		return exitHelperFailure
	}
	// The spec first: os.NewFile of the (non-blocking) status pipe makes the
	// runtime's poller, whose descriptor could take a missing spec's number.
	spec, raw, err := readSpec(specFD)
	h := &helper{status: os.NewFile(uintptr(statusFD), "status"), statusFD: statusFD, specFD: specFD, inner: inner}
	if err != nil {
		return h.fail(fmt.Errorf("bad spec: %s", err))
	}
	h.spec, h.raw = spec, raw
	return h.run()
}

// parseFD parses a descriptor number (digits only), or returns -1.
func parseFD(s string) int {
	v, err := parseWireNum(s)
	if err != nil || v > math.MaxInt32 {
		return -1
	}
	return int(v)
}

// readSpec reads and decodes the spec file, and closes it.
func readSpec(fd int) (*wireSpec, []byte, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("cannot read it: %s", err.Error())
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, errors.New("cannot read it: not a regular file")
	}
	if st.Size > maxSpec {
		return nil, nil, fmt.Errorf("%d bytes, more than %d", st.Size, maxSpec)
	}
	b := make([]byte, st.Size)
	for got := 0; got < len(b); {
		n, err := unix.Pread(fd, b[got:], int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cannot read it: %s", err.Error())
		}
		if n == 0 {
			return nil, nil, errors.New("cannot read it: short read")
		}
		got += n
	}
	spec, err := decodeWire(b)
	return spec, b, err
}

type helper struct {
	spec       *wireSpec
	raw        []byte // the spec as read (for the inner supervisor)
	statusFD   int
	specFD     int
	inner      bool // in the namespaces of the spec
	status     *os.File
	pid        int  // the program
	hostPID    int  // the program's pid in the host (namespaces only)
	hostproc   int  // the host's /proc (namespaces only)
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
	// Nothing but 0, 1, 2 and the extra files may reach the program.
	_ = unix.CloseRange(uint(3+h.spec.extra), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	ns := h.spec.ns
	// The host may have died before the parent-death signal was armed (the inner
	// supervisor's parent is the outer one, which checked).
	if !h.inner && os.Getppid() != h.spec.hostPID {
		return h.fail(errors.New("the host process is gone"))
	}
	if h.spec.view != nil {
		return h.fail(errors.New(errNeedsC))
	}
	if ns != nil && !h.inner {
		return h.runOuter()
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return h.fail(fmt.Errorf("cannot become a child subreaper: %w", err))
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append([]os.Signal{SignalHostDied, SignalTerminate}, forwarded...)...)
	if ns != nil {
		hostproc, err := setupNS(ns)
		if err != nil {
			return h.fail(err)
		}
		h.hostproc = hostproc
		if ns.flags&nsWait != 0 {
			buf := make([]byte, 32)
			n, err := unix.Readlinkat(hostproc, "self", buf)
			if err != nil {
				return h.fail(fmt.Errorf("cannot tell the supervisor's pid in the host: %s", errText(err)))
			}
			h.report("N %s", buf[:n])
			var go1 [1]byte
			n, err = unix.Read(ns.lifeline, go1[:])
			for err == unix.EINTR {
				n, err = unix.Read(ns.lifeline, go1[:])
			}
			if n == 0 && err == nil {
				return exitHelperFailure // the host gave up (or died): nobody to tell
			}
			if err != nil || go1[0] != 'G' {
				return h.fail(errors.New("bad go-ahead from the host"))
			}
		}
		// See supervisor_linux.c: not before the host set the sandbox up.
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}

	files := make([]uintptr, 3+h.spec.extra)
	for i := range files {
		files[i] = uintptr(i)
	}
	pid, err := h.startConfined(files)
	if err != nil {
		return h.fail(err)
	}
	h.pid = pid
	if ns != nil {
		unix.Close(h.hostproc)
		h.report("S %d", h.hostPID)
	} else {
		h.report("S %d", h.pid)
	}

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
				if ns != nil && !hostGone(ns.lifeline) || ns == nil && os.Getppid() == h.spec.hostPID {
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
	// The hard limits that rise are raised on the supervisor itself (it keeps its
	// soft limits), while it has its capabilities: raising one needs
	// CAP_SYS_RESOURCE, which a stage may drop from this thread. The program
	// inherits them, and gets its final limits after exec.
	for _, l := range h.spec.rlimits {
		var old unix.Rlimit
		err := unix.Prlimit(0, l.Resource, nil, &old)
		if err == nil && max(l.Value, l.Hard) > old.Max {
			err = unix.Prlimit(0, l.Resource, &unix.Rlimit{Cur: old.Cur, Max: max(l.Value, l.Hard)}, nil)
		}
		if err != nil {
			return 0, fmt.Errorf("cannot set resource limit %d to %d: %w", l.Resource, l.Value, err)
		}
	}
	for _, st := range h.spec.stages {
		h.restricted = true
		if err := st.apply(); err != nil {
			// Without its errno: the host must report a sandbox that could not be
			// set up, not a program that does not exist (ENOENT) or cannot run.
			return 0, errors.New("cannot apply " + st.Kind + ": " + err.Error())
		}
	}
	stop := len(h.spec.rlimits) > 0
	pid, err := syscall.ForkExec(h.spec.path, h.spec.args, &syscall.ProcAttr{
		Env:   h.spec.env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Ptrace: stop},
	})
	if err != nil {
		return 0, &os.PathError{Op: "fork/exec", Path: h.spec.path, Err: err}
	}
	if h.spec.ns != nil {
		// On the thread that forked it: its children in the host's /proc.
		if h.hostPID, err = hostPidOfChild(h.hostproc); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, unix.WALL, nil)
			return 0, err
		}
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
	for _, l := range h.spec.rlimits {
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
