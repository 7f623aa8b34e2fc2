package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stage2 is pid 1 of a program's namespaces: descriptor 3 brings its spec (a
// line of JSON), then the signals for the program (a byte each), 4 is the
// status pipe, 5... the program's descriptors 0, 1, 2...
// rlimitNice is RLIMIT_NICE (the syscall package does not name it).
const rlimitNice = 13

func stage2() int {
	// Capabilities, securebits and no_new_privs are the thread's: the one
	// thread that sets them starts the program.
	runtime.LockOSThread()
	status := os.NewFile(4, "status")
	report := func(format string, args ...any) { fmt.Fprintf(status, format+"\n", args...) }
	fail := func(err error) int {
		report("E %s", err)
		return 127
	}
	// The init runs under SCHED_BATCH (batchInit); the program does not
	// (this thread starts it, and it inherits the thread's policy).
	if err := setScheduler(0, schedOther); err != nil {
		return fail(fmt.Errorf("scheduling policy: %w", err))
	}
	// A spare (spare.go) has a socket at 3: the spec comes with the
	// program's descriptors.
	ctlFile := os.NewFile(3, "control")
	ctl := bufio.NewReader(ctlFile)
	spareMode := isSocket(3)
	var received []int
	if spareMode {
		first, fds, err := recvSpec(3)
		if err != nil {
			return fail(fmt.Errorf("spec: %w", err))
		}
		received = fds
		ctl = bufio.NewReader(io.MultiReader(bytes.NewReader(first), ctlFile))
		// Started under SCHED_IDLE: every thread back to SCHED_OTHER, or
		// the relay of the program's signals would wait for an idle vCPU.
		if err := threadsPolicy(0, schedOther); err != nil {
			return fail(fmt.Errorf("scheduling policy: %w", err))
		}
	}
	b, err := readLine(ctl, 64<<20)
	if err != nil {
		return fail(fmt.Errorf("spec: %w", err))
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	var m spawnSpec
	if err := json.Unmarshal(b, &m); err != nil {
		return fail(fmt.Errorf("spec: %w", err))
	}
	if spareMode {
		if len(received) != len(m.FDs) {
			return fail(fmt.Errorf("spec: %d descriptors for %d", len(received), len(m.FDs)))
		}
		// The spare shares the init's mount namespace: this thread (which
		// builds the root and starts the program) takes a copy of it now,
		// with the programs' root as the host's setup built it.
		if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
			return fail(fmt.Errorf("mount namespace: %w", err))
		}
	}
	if err := stage2Root(&m); err != nil {
		return fail(err)
	}
	// RLIMIT_NICE 20: the program may bring a process of its own back to
	// nice 0 or SCHED_OTHER after lowering it (never higher than any program
	// starts); the default limit (0) refuses that.
	if err := syscall.Setrlimit(rlimitNice, &syscall.Rlimit{Cur: 20, Max: 20}); err != nil {
		return fail(fmt.Errorf("RLIMIT_NICE: %w", err))
	}
	if err := dropPrivileges(); err != nil {
		return fail(err)
	}
	// Not dumpable: the program (same uid, no capability) cannot reach this
	// process through /proc or ptrace.
	prctl(syscall.PR_SET_DUMPABLE, 0)
	files := make([]uintptr, len(m.FDs))
	for i := range m.FDs {
		if spareMode {
			files[i] = uintptr(received[i]) // close-on-exec already
			continue
		}
		files[i] = uintptr(5 + i)
		syscall.CloseOnExec(5 + i)
	}
	// The signals for the program come from the init as bytes after the
	// spec, never as signals to this process: those can only come from the
	// program's namespace (pid 1 gets no signal it does not handle, and the
	// init kills it with SIGKILL only), and are dropped, as the supervisor of
	// the namespace providers drops them. Handled, not ignored: an ignored
	// signal would be ignored by the program too (exec keeps SIG_IGN).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGPIPE)
	// The resource limits apply to the program only: it starts stopped at its
	// exec (PTRACE_TRACEME), gets them with prlimit, and goes on.
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   m.Env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: m.UID, Gid: m.GID, NoSetGroups: true},
			Ptrace:     len(m.Rlimits) > 0,
			Setpgid:    true,
		},
	}
	if m.Dir != "" {
		if st, err := os.Stat(m.Dir); err == nil && st.IsDir() {
			attr.Dir = m.Dir
		}
	}
	if err := prctl(prSetNoNewPrivs, 1); err != nil {
		return fail(fmt.Errorf("no_new_privs: %w", err))
	}
	if err := denyKeys(); err != nil {
		return fail(err)
	}
	pid, err := syscall.ForkExec(m.Path, m.Args, attr)
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", m.Path, err))
	}
	if len(m.Rlimits) > 0 {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
			syscall.Kill(pid, syscall.SIGKILL)
			return fail(fmt.Errorf("start %s: not stopped at exec (%v)", m.Path, err))
		}
		for _, r := range m.Rlimits {
			lim := syscall.Rlimit{Cur: r[1], Max: r[2]}
			if err := prlimit(pid, int(r[0]), &lim); err != nil {
				syscall.Kill(pid, syscall.SIGKILL)
				return fail(fmt.Errorf("resource limit %d: %w", r[0], err))
			}
		}
		if err := syscall.PtraceDetach(pid); err != nil {
			syscall.Kill(pid, syscall.SIGKILL)
			return fail(fmt.Errorf("start %s: %w", m.Path, err))
		}
	}
	for i := range files {
		syscall.Close(int(files[i]))
	}
	// A pidfd: a signal that comes after the program was reaped reaches no
	// other process that got its pid.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return fail(fmt.Errorf("pidfd_open: %w", err))
	}
	report("S %d", pid)
	go func() {
		for {
			b, err := ctl.ReadByte()
			if err != nil {
				return // the init closed it: the program ended
			}
			settle(pid)
			unix.PidfdSendSignal(pidfd, unix.Signal(b), nil, 0)
		}
	}()
	// Reap every process of the namespace until the program ends.
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			report("E wait: %s", err)
			return 127
		}
		if wpid == pid && (ws.Exited() || ws.Signaled()) {
			report("X %d", uint32(ws))
			// Returning ends the namespace: the kernel kills what is left.
			return 0
		}
	}
}

// settle waits, a bounded time (100 ms), until the program is not held
// runnable by another task of the guest: asleep, stopped or gone, or after
// 2 ms of its own on a CPU since the signal came (a program that computes).
//
// On a host the program has a CPU while the host reads its output and
// answers with a signal, and is past its write (and into what it does next)
// when the signal comes. On the guest's one CPU it may have been preempted
// inside that write, or just after it, and have stood still since: a signal
// delivered then lands in the middle of the write (CPython runs the handler
// inside print's flush, where the handler's own print fails with "reentrant
// call") or between CPython's last check of its signals and the sleep it was
// entering (which then sleeps on). Letting it run first delivers the signal
// where a program with a CPU of its own would have been.
func settle(pid int) {
	deadline := time.Now().Add(100 * time.Millisecond)
	start, timed := onCPU(pid)
	for time.Now().Before(deadline) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(st, ')')
		if err != nil || i < 0 || i+2 >= len(st) || st[i+2] != 'R' {
			return
		}
		if t, ok := onCPU(pid); timed && ok && t-start >= 2e6 {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// onCPU is the time the program's main thread has spent on a CPU, in
// nanoseconds (/proc/pid/schedstat).
func onCPU(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, false
	}
	var t int64
	_, err = fmt.Sscan(string(b), &t)
	return t, err == nil
}

// readLine reads a line (without its newline) of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		b, err := r.ReadSlice('\n')
		if len(line)+len(b) > max {
			return nil, fmt.Errorf("longer than %d bytes", max)
		}
		line = append(line, b...)
		if err == nil {
			return line[:len(line)-1], nil
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
	}
}

// spawnSpec is wire.SpawnMsg as stage 2 reads it.
type spawnSpec struct {
	Path    string      `json:"path"`
	Args    []string    `json:"args"`
	Env     []string    `json:"env"`
	Dir     string      `json:"dir"`
	FDs     []struct{}  `json:"fds"`
	UID     uint32      `json:"uid"`
	GID     uint32      `json:"gid"`
	Rlimits [][3]uint64 `json:"rlimits"`
}

func prlimit(pid, resource int, lim *syscall.Rlimit) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), uintptrOf(lim), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// stage2Root gives the program its root: the view, with a private /proc (of
// the new pid namespace), /tmp and /dev.
func stage2Root(m *spawnSpec) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	const nosuid = syscall.MS_NOSUID | syscall.MS_NODEV
	if err := syscall.Mount("proc", viewRoot+"/proc", "proc", nosuid|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	if err := hardenProc(viewRoot + "/proc"); err != nil {
		return err
	}
	if ents, err := os.ReadDir(viewRoot + "/tmp"); err != nil || isShare(viewRoot+"/tmp") {
		// An exposed /tmp: the share itself.
	} else if len(ents) == 0 {
		if err := syscall.Mount("tmpfs", viewRoot+"/tmp", "tmpfs", nosuid, "mode=1777"); err != nil {
			return fmt.Errorf("/tmp: %w", err)
		}
	} else if err := freshTmp(viewRoot + "/tmp"); err != nil {
		return err
	}
	dev := viewRoot + "/dev"
	if err := syscall.Mount("tmpfs", dev, "tmpfs", syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=755,size=65536"); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		f, err := os.OpenFile(dev+"/"+n, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := syscall.Mount("/dev/"+n, dev+"/"+n, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("/dev/%s: %w", n, err)
		}
	}
	os.Mkdir(dev+"/shm", 0o1777)
	syscall.Mount("tmpfs", dev+"/shm", "tmpfs", nosuid, "mode=1777")
	for _, l := range [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}} {
		os.Symlink(l[0], dev+"/"+l[1])
	}
	syscall.Mount("", dev, "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NOEXEC, "mode=755,size=65536")
	if err := syscall.Chroot(viewRoot); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return syscall.Chdir("/")
}

// dropPrivileges makes sure that no program of the namespace ever holds a
// capability: the bounding set is emptied (no file capability can grant
// one) and the securebits make uid 0 an ordinary user at exec, locked. Stage
// 2 keeps its own capabilities (to set the program's resource limits).
func dropPrivileges() error {
	for c := 0; c < 64; c++ {
		if err := prctl(syscall.PR_CAPBSET_DROP, uintptr(c)); err != nil {
			if err == syscall.EINVAL {
				break // past the last capability of the kernel
			}
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	const secbitNoroot, secbitNorootLocked = 1 << 0, 1 << 1
	if err := prctl(syscall.PR_SET_SECUREBITS, secbitNoroot|secbitNorootLocked); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	return nil
}
