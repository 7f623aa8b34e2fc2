package wire

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrOverrun reports a peer that broke the flow control of a stream: more
// than Window bytes received and not yet credited, an empty Data chunk, or
// anything after the stream's EOF. Push refuses it and stops the flow, so
// that what a peer makes the receiver hold stays bounded (Window bytes and as
// many chunks a stream) whatever the peer does.
var ErrOverrun = errors.New("wire: the peer overran the stream's window")

// Flow is one side's end of a stream (the host's and the guest's are alike):
// the chunks received for it, queued until they are written out and
// acknowledged by Credit frames (CreditBatch bytes at a time), and the window of bytes it may still send,
// which the peer's Credit frames refill. Its methods are safe for concurrent
// use: the frame reader calls Push and Credit, one goroutine Receive, another
// Send.
type Flow struct {
	w  *Writer
	id uint32

	mu      sync.Mutex
	cond    sync.Cond
	queue   [][]byte // received chunks (nil: the peer's EOF)
	held    int64    // bytes received and not yet credited to the peer
	owed    int64    // bytes written out and not yet credited
	eof     bool     // the peer's EOF was received
	window  int64    // bytes this side may still send
	stopped bool
	// busy: Receive is writing a chunk; broken: a write failed (the reader
	// left), what comes is dropped.
	busy, broken bool
	// try writes a chunk without waiting (see SetTryWrite).
	try func([]byte) (int, error)
}

// SetTryWrite lets Push write a chunk itself, with try, when nothing
// received before it waits to be written: try must never block (it returns
// how much it wrote; what it did not is queued for Receive, in order). A
// chunk then reaches the reader without a hand-over to the goroutine that
// runs Receive (on a guest with one vCPU under TCG, a wake-up and a
// goroutine switch on the path of each request). Call it before the flow is
// used.
func (f *Flow) SetTryWrite(try func([]byte) (int, error)) { f.try = try }

// NewFlow returns the flow of stream id, whose frames are written to w, with
// a full window.
func NewFlow(w *Writer, id uint32) *Flow {
	f := &Flow{w: w, id: id, window: Window}
	f.cond.L = &f.mu
	return f
}

// Push queues a received chunk (a Data frame's payload; nil for EOF). A
// chunk beyond the window the peer was given, an empty one or one after the
// EOF is refused with ErrOverrun: the flow is stopped and what it held
// dropped (the caller ends the channel).
func (f *Flow) Push(b []byte) error {
	f.mu.Lock()
	var err error
	switch {
	case f.eof:
		err = fmt.Errorf("%w: stream %d: a frame after its EOF", ErrOverrun, f.id)
	case b != nil && len(b) == 0:
		err = fmt.Errorf("%w: stream %d: an empty Data frame", ErrOverrun, f.id)
	case f.held+int64(len(b)) > Window:
		err = fmt.Errorf("%w: stream %d: %d bytes held, %d more received (window %d)", ErrOverrun, f.id, f.held, len(b), Window)
	}
	var credit int64
	if err != nil {
		f.stopped = true
		f.queue = nil
	} else {
		f.held += int64(len(b))
		f.eof = b == nil
		if b != nil && f.try != nil && len(f.queue) == 0 && !f.busy && !f.broken && !f.stopped {
			// Nothing received before it waits: written now, in the
			// frame reader's goroutine (try never blocks); a failure or
			// a part not written is left to Receive.
			if n, werr := f.try(b); werr == nil && n > 0 {
				n = min(n, len(b))
				b = b[n:]
				credit = f.wrote(int64(n))
			}
		}
		if len(b) > 0 || f.eof {
			f.queue = append(f.queue, b)
		}
	}
	f.mu.Unlock()
	f.cond.Broadcast()
	if credit > 0 {
		f.w.Write(Credit, f.id, U32(uint32(credit)))
	}
	return err
}

// wrote counts n bytes written out and returns what is now to be credited
// to the peer (0: less than CreditBatch owed). f.mu is held.
func (f *Flow) wrote(n int64) int64 {
	f.owed += n
	if f.owed < CreditBatch {
		return 0
	}
	// What is credited is no longer held: the peer may send it again once
	// the credit arrives.
	c := f.owed
	f.held -= c
	f.owed = 0
	return c
}

// Credit widens the window by n bytes (a Credit frame).
func (f *Flow) Credit(n int64) {
	f.mu.Lock()
	f.window += n
	f.mu.Unlock()
	f.cond.Broadcast()
}

// Stop ends Send and Receive (the program or the channel is gone).
func (f *Flow) Stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *Flow) isStopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

// next waits for the next received chunk; ok is false once the flow is
// stopped (with drain, only once the chunks received before are taken too).
func (f *Flow) next(drain bool) (b []byte, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.queue) == 0 && !f.stopped {
		f.cond.Wait()
	}
	if len(f.queue) == 0 || f.stopped && !drain {
		return nil, false
	}
	b = f.queue[0]
	f.queue = f.queue[1:]
	f.busy = b != nil
	return b, true
}

// CreditBatch is how many written bytes a receiver owes before it sends a
// Credit frame. Crediting each chunk costs a frame per chunk: on a guest under
// TCG with one vCPU, the guest's Credit for a request (a write to the
// virtio-serial port, a VM exit) ran on the processor the evaluation waited
// for. A sender never waits for less than Window-CreditBatch bytes it sent:
// whenever its window is empty, the receiver owes at least CreditBatch bytes
// once it has written what it received, and credits them.
const CreditBatch = Window / 4

// Receive writes the received chunks with write, in order, and credits them to
// the peer, CreditBatch bytes at a time. Once write fails (the reader left)
// the chunks are dropped but still credited, so that the peer never blocks on
// a full window. It returns true at the peer's EOF, false when the flow is
// stopped; with drain, what was received before the stop is written first.
func (f *Flow) Receive(write func([]byte) error, drain bool) (eof bool) {
	broken := false
	for {
		b, ok := f.next(drain)
		if !ok {
			return false
		}
		if b == nil {
			return true
		}
		if !broken && write(b) != nil {
			broken = true
		}
		f.mu.Lock()
		f.busy = false
		f.broken = broken
		credit := f.wrote(int64(len(b)))
		f.mu.Unlock()
		if credit > 0 {
			f.w.Write(Credit, f.id, U32(uint32(credit)))
		}
	}
}

// Send sends what r gives as Data frames, never more than the window allows,
// and an EOF frame once r ends or fails. It returns then, when writing a frame
// fails, or when the flow is stopped (nothing is sent after the stop).
func (f *Flow) Send(r io.Reader) {
	buf := make([]byte, ChunkSize)
	for {
		f.mu.Lock()
		for f.window <= 0 && !f.stopped {
			f.cond.Wait()
		}
		n := int(min(f.window, int64(len(buf))))
		stopped := f.stopped
		f.mu.Unlock()
		if stopped {
			return
		}
		k, err := r.Read(buf[:n])
		if k > 0 {
			f.mu.Lock()
			f.window -= int64(k)
			stopped := f.stopped
			f.mu.Unlock()
			if stopped || f.w.Write(Data, f.id, buf[:k]) != nil {
				return
			}
		}
		if err != nil {
			if !f.isStopped() {
				f.w.Write(EOF, f.id, nil)
			}
			return
		}
	}
}
