package qemu

import (
	"errors"
	"os"
	"sync/atomic"
	"time"
)

// The VM's own port for one channel.
//
// Every stream of a program is relayed by the guest's init over the one
// control port, multiplexed in frames with windows of credit. A request the
// caller waits on then costs the init's turn twice in the guest (it reads the
// frame and writes the program's socket, it reads the answer and writes a
// frame): on a guest with one vCPU under TCG about 1.2 ms of an evaluation's
// round trip. Each VM has a second virtio-serial port (wire.FastPort) that one
// program gets as a descriptor of its own: the driver.Request's Channel, when
// it names a socket. The program reads and writes the port itself; the host
// copies between the port's chardev socket and the caller's socket.
//
// What a port cannot do, and how the host makes up for it:
//
//   - It carries no end of stream: a guest that reads a port whose host side
//     is closed reads its end, and the host cannot close one direction alone.
//     That is why only a channel the caller closes whole gets it
//     (driver.Request.Channel): once the caller has shut down its writing side
//     the host closes the port both ways, and the program reads its end.
//   - The guest's init keeps the port open for the VM's life (a port closed
//     by the guest may drop what QEMU had not written yet), so the program's
//     end is not seen on the port either: when the init reports the program's
//     exit, the host goes on reading the port until it has been quiet for
//     fastDrainIdle (at most fastDrainMax), then ends the stream. What the
//     program wrote before its exit is in the socket by then: under TCG a
//     write to a port reaches QEMU's socket before the guest's write returns,
//     and QEMU writes what it held back as soon as the host reads.
//   - A port is given once in a VM's life: what a program left unread in it
//     would reach the next one. A later channel is relayed by the init as any
//     socket.

// fastDrainIdle and fastDrainMax bound the reading of the port once its
// program has exited. Only a program that ends by itself (a zygote that gives
// up) waits for them: at the caller's end, the port is closed at once. The
// idle window is generous for a QEMU that handles the port's notifications
// in its main loop, behind a loaded host (KVM's ioeventfd; under TCG the data
// is in the socket before the guest's write returns).
const (
	fastDrainIdle = 250 * time.Millisecond
	fastDrainMax  = 5 * time.Second
)

// fastStream is the host's side of a program's channel on the VM's own port.
type fastStream struct {
	port *os.File
	// ended: the program has exited (the port is drained, then closed).
	ended atomic.Bool
}

// toGuest copies what the caller writes to the port; the caller's end (or a
// failed write) closes the port both ways: the program reads its end.
func (s *hstream) fastToGuest() {
	buf := make([]byte, 64<<10)
	for {
		n, err := s.fd.R.Read(buf)
		if n > 0 {
			if _, werr := s.fast.port.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.fast.port.Close()
}

// fastToHost copies what the program writes to the caller, until the port
// is closed (the caller's end, the VM's) or, once the program has exited,
// quiet.
func (s *hstream) fastToHost() {
	defer s.finish()
	defer func() {
		// Done with the port: the copy toward the guest stops too.
		s.fast.port.Close()
		if s.fd.StopR != nil {
			s.fd.StopR()
		}
	}()
	buf := make([]byte, 64<<10)
	var drainEnd time.Time
	broken := false // the caller's reader left: what comes is read and dropped
	for {
		if s.fast.ended.Load() {
			now := time.Now()
			if drainEnd.IsZero() {
				drainEnd = now.Add(fastDrainMax)
			}
			d := now.Add(fastDrainIdle)
			if d.After(drainEnd) {
				d = drainEnd
			}
			s.fast.port.SetReadDeadline(d)
		}
		n, err := s.fast.port.Read(buf)
		if n > 0 && !broken {
			if _, werr := s.fd.W.Write(buf[:n]); werr != nil {
				broken = true
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !s.fast.ended.Load() {
				continue // a deadline set as the program ended, before ended was seen
			}
			return
		}
	}
}

// fastEnded says that the program has exited: the port is read until quiet.
func (s *hstream) fastEnded() {
	if s.fast.ended.CompareAndSwap(false, true) {
		// Wake a read in progress, to take the drain's deadline.
		s.fast.port.SetReadDeadline(time.Now().Add(fastDrainIdle))
	}
}

// fastAbort stops both directions now (the VM is gone).
func (s *hstream) fastAbort() {
	s.fast.port.Close()
	if s.fd.StopR != nil {
		s.fd.StopR()
	}
}
