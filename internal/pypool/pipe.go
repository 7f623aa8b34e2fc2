package pypool

import (
	"fmt"
	"os"
	"syscall"
)

// Pipe is the byte channel between the host and a process's Python side, as
// the host makes it: a connected pair of Unix stream sockets, whose child end
// the process receives as an extra descriptor. A provider that runs the
// process elsewhere relays that descriptor's bytes over its own transport (the
// qemu provider, over its stream multiplexer to a socket in the VM): the
// process sees a stream socket all the same, and the host its Host end.
type Pipe struct {
	// Host is the host's end; Child the process's, to pass as an extra file
	// (the host closes its copy once the process has started).
	Host, Child *os.File
}

// NewPipe makes a channel (both ends close on exec).
func NewPipe() (*Pipe, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	return &Pipe{Host: os.NewFile(uintptr(fds[0]), "pysandboxes-channel"), Child: os.NewFile(uintptr(fds[1]), "pysandboxes-channel-child")}, nil
}

// CloseWrite ends the host's side (the process reads the end of the stream;
// an idle one then exits), keeping the host's reading side open.
func (p *Pipe) CloseWrite() {
	if rc, err := p.Host.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_WR) })
	}
}
