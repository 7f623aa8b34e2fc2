package qemu

import (
	"errors"
	"os"
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
