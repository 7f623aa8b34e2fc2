package qemu

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// TestCtlWriterStalledGuest: a guest that stops reading its channel (root in
// the guest can stop the init) does not hold the host's writers: once the
// channel's buffers are full, a write fails at its deadline and the VM is
// stopped, instead of blocking every later spawn, signal and kill.
func TestCtlWriterStalledGuest(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.SetNonblock(fds[0], true)
	host, guest := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "guest")
	defer host.Close()
	defer guest.Close() // never read: the guest that stopped
	stalled := make(chan struct{}, 1)
	w := wire.NewWriter(&ctlWriter{f: host, timeout: 200 * time.Millisecond, stalled: func() { stalled <- struct{}{} }})
	done := make(chan error, 1)
	go func() {
		chunk := make([]byte, wire.ChunkSize)
		for {
			if err := w.Write(wire.Data, 1, chunk); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the write to a guest that reads nothing failed with %v, want a deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the host's writer is still blocked on a guest that reads nothing")
	}
	select {
	case <-stalled:
	default:
		t.Fatal("the stalled guest's VM was not stopped")
	}
}

// TestReadOverrunEndsChannel: a guest that sends a stream more than its
// window (root in the guest writing the port itself, while the host's writer
// of the stream is blocked) ends the channel: the host does not hold the
// excess, the stream is aborted and the program reported lost.
func TestReadOverrunEndsChannel(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, guest := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "guest")
	defer guest.Close()
	v := &vm{cmd: &exec.Cmd{}, ctl: host, w: wire.NewWriter(host), cons: &ring{max: 1 << 10},
		streams: map[uint32]*hstream{}, procs: map[uint32]*hproc{}, dead: make(chan struct{})}
	// The stream's writer never returns (a caller that does not read).
	block := make(chan struct{})
	defer close(block)
	s := &hstream{id: 2, fd: hostFD{Dir: wire.Out, W: blockingWriter(block)}, flow: wire.NewFlow(v.w, 2), drained: make(chan struct{})}
	p := &hproc{id: 1, streams: []*hstream{s}, startCh: make(chan struct{}), exitCh: make(chan struct{})}
	v.streams[2], v.procs[1] = s, p
	go s.toHost()
	done := make(chan struct{})
	go func() {
		v.read()
		close(done)
	}()
	// The guest's side: data frames on stream 2 without waiting for credit.
	gw := wire.NewWriter(guest)
	go func() {
		chunk := make([]byte, wire.ChunkSize)
		for i := 0; i < 2*wire.Window/wire.ChunkSize; i++ {
			if gw.Write(wire.Data, 2, chunk) != nil {
				return
			}
		}
	}()
	go io.Copy(io.Discard, guest) // the host's credits
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the host's reader still runs after the guest overran a stream's window")
	}
	v.mu.Lock()
	err = v.readErr
	v.mu.Unlock()
	if !errors.Is(err, wire.ErrOverrun) {
		t.Fatalf("the channel ended with %v, want wire.ErrOverrun", err)
	}
	select {
	case <-p.exitCh:
	case <-time.After(5 * time.Second):
		t.Fatal("the program of the overrun channel is not reported lost")
	}
}

type blockingWriter chan struct{}

func (b blockingWriter) Write(p []byte) (int, error) {
	<-b
	return 0, io.ErrClosedPipe
}
