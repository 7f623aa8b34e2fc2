package main

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A spare is a stage 2 started ahead of its program: its Go runtime (about
// 20 ms of a warm guest's vCPU under TCG, 45 ms at the first program of a VM)
// is up before the program is asked for. It is started under SCHED_IDLE, so
// that it takes only a vCPU nothing else wants (a running program is not
// slowed by the next program's spare), in pid, IPC and UTS namespaces of its
// own and in the init's mount namespace: the programs' root is built by the
// host's setup, after the first spare (the one a saved VM state holds) was
// started. Given a program, it unshares its mount namespace (a copy of the
// init's as it is then) before it builds the program's root, puts its
// threads back under SCHED_OTHER, and goes on as a stage 2 started for the
// program: its control descriptor (3) is a Unix socket instead of a pipe,
// and the program's descriptors come with the spec (SCM_RIGHTS) instead of
// at 5 and up.
type spare struct {
	cmd  *exec.Cmd
	ctl  *os.File // the init's end of the control socket
	stat *os.File // the read end of the status pipe
}

// spares holds at most one spare, made again after each use.
type spares struct {
	mu    sync.Mutex
	next  *spare
	timer *time.Timer
}

// refillDelay is how long after a spare is taken the next one is started.
// Not at once: under TCG a process that runs while the program waits for
// its files (9p) makes the program's code cold again when it resumes (QEMU
// flushes its TLB and jump cache at each switch of address space), and a
// spare started with the program slowed Python's first line by about 0.2 s
// of the 0.7 s it takes in a restored VM. Later than the program's start,
// the spare takes only an idle vCPU; a program started before it is ready
// gets a stage 2 of its own, as without spares.
const refillDelay = 2 * time.Second

// take returns the spare (nil: none) and starts the next one later.
func (s *spares) take() *spare {
	s.mu.Lock()
	sp := s.next
	s.next = nil
	if s.timer == nil {
		s.timer = time.AfterFunc(refillDelay, s.fill)
	} else {
		s.timer.Reset(refillDelay)
	}
	s.mu.Unlock()
	return sp
}

// fill starts a spare when there is none.
func (s *spares) fill() {
	s.mu.Lock()
	have := s.next != nil
	s.mu.Unlock()
	if have {
		return
	}
	sp, err := startSpare()
	if err != nil {
		return // the next program starts a stage 2 of its own
	}
	s.mu.Lock()
	old := s.next
	s.next = sp
	s.mu.Unlock()
	if old != nil {
		old.discard()
	}
}

// startSpare starts a stage 2 that waits for its program.
func startSpare() (*spare, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "spare"), os.NewFile(uintptr(fds[1]), "control")
	statR, statW, err := os.Pipe()
	if err != nil {
		mine.Close()
		theirs.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:       "/init",
		Args:       []string{stage2Marker},
		Env:        []string{},
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{theirs, statW},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			Setsid:     true,
		},
	}
	// SCHED_IDLE once it has started (its threads inherit the policy of
	// the thread that makes them). Not by forking it from a thread under
	// SCHED_IDLE: the fork waits for the child's exec, holding
	// syscall.ForkLock, and an idle child would exec only once no program
	// wants the vCPU, so that no other process could start until then.
	err = cmd.Start()
	if err == nil {
		setScheduler(cmd.Process.Pid, schedIdle)
	}
	theirs.Close()
	statW.Close()
	if err != nil {
		mine.Close()
		statR.Close()
		return nil, err
	}
	return &spare{cmd: cmd, ctl: mine, stat: statR}, nil
}

// discard ends a spare never used.
func (sp *spare) discard() {
	sp.ctl.Close()
	sp.stat.Close()
	sp.cmd.Process.Kill()
	sp.cmd.Wait()
}

// give sends the spare its spec (one line) with the program's descriptors.
// Its threads are put back under SCHED_OTHER first: a spare whose runtime is
// still starting, under SCHED_IDLE, would otherwise wait for a vCPU that a
// busy program of the VM may never leave idle.
func (sp *spare) give(spec []byte, files []*os.File) error {
	if err := threadsPolicy(sp.cmd.Process.Pid, schedOther); err != nil {
		return err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	line := append(spec, '\n')
	n, err := unix.SendmsgN(int(sp.ctl.Fd()), line, unix.UnixRights(fds...), nil, 0)
	if err != nil {
		return err
	}
	if n < len(line) {
		if _, err := sp.ctl.Write(line[n:]); err != nil {
			return err
		}
	}
	return nil
}

// recvSpec reads the first part of the control socket of a spare: the bytes
// of that read and the descriptors that came with them.
func recvSpec(fd int) ([]byte, []int, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(maxProgFDs*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("the control socket ended")
		}
		var fds []int
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			got, err := syscall.ParseUnixRights(&m)
			if err != nil {
				return nil, nil, err
			}
			fds = append(fds, got...)
		}
		return buf[:n], fds, nil
	}
}

// maxProgFDs bounds the descriptors a spare receives (the kernel's
// SCM_MAX_FD).
const maxProgFDs = 253

// isSocket reports whether fd is a socket.
func isSocket(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFSOCK
}
