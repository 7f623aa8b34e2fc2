package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// frames collects the frames a Flow writes.
type frames struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (f *frames) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(b)
}

func (f *frames) read(t *testing.T) []Frame {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	r := NewReader(bytes.NewReader(f.buf.Bytes()))
	var out []Frame
	for {
		fr, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fr)
	}
}

// TestFlowSendWindow: Send stops at the window, goes on after a credit, and
// ends with EOF; nothing is sent after Stop.
func TestFlowSendWindow(t *testing.T) {
	var out frames
	f := NewFlow(NewWriter(&out), 5)
	src := bytes.NewReader(bytes.Repeat([]byte("x"), Window+10))
	done := make(chan struct{})
	go func() {
		f.Send(src)
		close(done)
	}()
	// The window full: Send waits for a credit.
	sent := 0
	for sent < Window {
		runtime.Gosched()
		sent = 0
		for _, fr := range out.read(t) {
			if fr.Type != Data || fr.ID != 5 {
				t.Fatalf("unexpected %v frame of stream %d", fr.Type, fr.ID)
			}
			sent += len(fr.Payload)
		}
	}
	f.mu.Lock()
	w := f.window
	f.mu.Unlock()
	if sent != Window || w != 0 {
		t.Fatalf("%d bytes sent before a credit, window %d; want the window (%d), 0", sent, w, Window)
	}
	f.Credit(Window) // room for the rest and for the read that finds the end
	<-done
	fs := out.read(t)
	if last := fs[len(fs)-1]; last.Type != EOF {
		t.Errorf("last frame %v, want eof", last.Type)
	}
	// After Stop, a Send sends nothing (not even EOF).
	g := NewFlow(NewWriter(&out), 6)
	g.Stop()
	g.Send(bytes.NewReader([]byte("y")))
	for _, fr := range out.read(t) {
		if fr.ID == 6 {
			t.Errorf("a stopped flow sent a %v frame", fr.Type)
		}
	}
}

// TestFlowReceive: chunks are written in order and credited CreditBatch
// bytes at a time (nothing for a few small chunks), still credited (not
// written) once the writer failed; EOF reports true; a stop ends the relay at
// once, or once drained.
func TestFlowReceive(t *testing.T) {
	var out frames
	f := NewFlow(NewWriter(&out), 9)
	f.Push([]byte("ab"))
	f.Push([]byte("cde"))
	f.Push(bytes.Repeat([]byte("f"), CreditBatch-5-1))
	f.Push([]byte("gh"))      // the batch passed: credited with what came before
	f.Push([]byte("ijk"))     // dropped (the writer failed), owed
	f.Push(make([]byte, 100)) // owed
	f.Push(nil)
	var got []string
	eof := f.Receive(func(b []byte) error {
		got = append(got, string(b))
		if len(got) == 5 {
			return io.ErrClosedPipe
		}
		return nil
	}, false)
	if !eof || len(got) != 5 || got[0] != "ab" || got[1] != "cde" || got[3] != "gh" {
		t.Errorf("eof %v, written %d chunks; want true, 5 (ab cde f... gh ijk)", eof, len(got))
	}
	var credits []uint32
	for _, fr := range out.read(t) {
		n, err := ParseU32(fr.Payload)
		if fr.Type != Credit || fr.ID != 9 || err != nil {
			t.Fatalf("unexpected %v frame of stream %d", fr.Type, fr.ID)
		}
		credits = append(credits, n)
	}
	if len(credits) != 1 || credits[0] != CreditBatch+1 {
		t.Errorf("credits %v, want [%d]", credits, CreditBatch+1)
	}
	// A failed writer: what comes is still credited, in batches.
	out = frames{}
	f = NewFlow(NewWriter(&out), 9)
	for range 2 * CreditBatch / ChunkSize {
		f.Push(make([]byte, ChunkSize))
	}
	f.Push(nil)
	f.Receive(func([]byte) error { return io.ErrClosedPipe }, false)
	var sum uint32
	for _, fr := range out.read(t) {
		n, _ := ParseU32(fr.Payload)
		sum += n
	}
	if sum != 2*CreditBatch {
		t.Errorf("%d bytes credited after a failed write, want %d", sum, 2*CreditBatch)
	}

	write := func(n *int) func([]byte) error {
		return func([]byte) error { *n++; return nil }
	}
	for _, drain := range []bool{false, true} {
		g := NewFlow(NewWriter(io.Discard), 1)
		g.Push([]byte("x"))
		g.Stop()
		n := 0
		if g.Receive(write(&n), drain) {
			t.Errorf("drain %v: a stopped flow reported EOF", drain)
		}
		if want := map[bool]int{false: 0, true: 1}[drain]; n != want {
			t.Errorf("drain %v: %d chunks written after the stop, want %d", drain, n, want)
		}
	}
}

// TestFlowPushOverrun: a peer that sends beyond the window it was given, an
// empty chunk or anything after its EOF is refused (ErrOverrun) and the flow
// stops: what a peer makes the receiver hold is bounded whatever it sends.
func TestFlowPushOverrun(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), ChunkSize)
	t.Run("window", func(t *testing.T) {
		f := NewFlow(NewWriter(io.Discard), 1)
		for i := 0; i < Window/ChunkSize; i++ {
			if err := f.Push(chunk); err != nil {
				t.Fatalf("chunk %d within the window: %v", i, err)
			}
		}
		if err := f.Push([]byte("y")); !errors.Is(err, ErrOverrun) {
			t.Fatalf("a byte beyond the window: got %v, want ErrOverrun", err)
		}
		if !f.isStopped() {
			t.Fatal("the flow is not stopped after an overrun")
		}
		f.mu.Lock()
		n := len(f.queue)
		f.mu.Unlock()
		if n != 0 {
			t.Fatalf("the overrun flow still holds %d chunks", n)
		}
	})
	t.Run("credited", func(t *testing.T) {
		// What the receiver wrote and credited frees the window again.
		var out frames
		f := NewFlow(NewWriter(&out), 2)
		done := make(chan bool)
		go func() { done <- f.Receive(func([]byte) error { return nil }, false) }()
		for i := 0; i < 3*Window/ChunkSize; i++ {
			for {
				f.mu.Lock()
				room := f.held+ChunkSize <= Window
				f.mu.Unlock()
				if room {
					break
				}
				runtime.Gosched()
			}
			if err := f.Push(chunk); err != nil {
				t.Fatalf("chunk %d after credits: %v", i, err)
			}
		}
		if err := f.Push(nil); err != nil {
			t.Fatal(err)
		}
		if !<-done {
			t.Fatal("Receive did not see the EOF")
		}
	})
	t.Run("empty", func(t *testing.T) {
		f := NewFlow(NewWriter(io.Discard), 3)
		if err := f.Push([]byte{}); !errors.Is(err, ErrOverrun) {
			t.Fatalf("an empty Data chunk: got %v, want ErrOverrun", err)
		}
	})
	t.Run("after-eof", func(t *testing.T) {
		f := NewFlow(NewWriter(io.Discard), 4)
		if err := f.Push(nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Push([]byte("z")); !errors.Is(err, ErrOverrun) {
			t.Fatalf("data after EOF: got %v, want ErrOverrun", err)
		}
		if err := f.Push(nil); !errors.Is(err, ErrOverrun) {
			t.Fatalf("a second EOF: got %v, want ErrOverrun", err)
		}
	})
}

// loop carries one side's frames to the other's flow, as the frame readers of
// the host and the guest do.
type loop struct {
	peer *Flow
	mu   sync.Mutex
	buf  []byte
}

func (l *loop) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		r := NewReader(bytes.NewReader(l.buf))
		fr, err := r.Read()
		if err != nil {
			return len(b), nil
		}
		n := headerSize + len(fr.Payload)
		l.buf = l.buf[n:]
		switch fr.Type {
		case Data:
			l.peer.Push(fr.Payload)
		case EOF:
			l.peer.Push(nil)
		case Credit:
			m, _ := ParseU32(fr.Payload)
			l.peer.Credit(int64(m))
		}
	}
}

// TestFlowBatchedCreditsNeverStall: a sender relaying several windows to a
// receiver that credits in batches goes to the end (the receiver's credits
// always come back before the sender's window is empty for good), and the
// bytes arrive whole and in order.
func TestFlowBatchedCreditsNeverStall(t *testing.T) {
	snd := NewFlow(nil, 3)
	rcv := NewFlow(nil, 3)
	snd.w = NewWriter(&loop{peer: rcv})
	rcv.w = NewWriter(&loop{peer: snd})
	want := make([]byte, 3*Window+12345)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go snd.Send(bytes.NewReader(want))
	var got bytes.Buffer
	done := make(chan bool)
	go func() {
		done <- rcv.Receive(func(b []byte) error {
			got.Write(b)
			return nil
		}, false)
	}()
	select {
	case eof := <-done:
		if !eof {
			t.Fatal("the receiver stopped without the sender's EOF")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the relay stalled: the sender waits for credits the receiver does not send")
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("received %d bytes, not the %d sent", got.Len(), len(want))
	}
}

// TestFlowTryWrite: with a write that never waits (here a real non-blocking
// pipe), a chunk is written by Push itself when nothing waits before it, the
// rest by Receive; whatever way each chunk went, the reader gets the bytes in
// order, and every byte is counted once (credited CreditBatch at a time, the
// rest owed).
func TestFlowTryWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd := int(w.Fd()) // Fd makes it blocking: set it back
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	var out frames
	f := NewFlow(NewWriter(&out), 4)
	f.SetTryWrite(func(b []byte) (int, error) {
		n, err := syscall.Write(fd, b)
		if err != nil {
			return 0, err
		}
		return n, nil
	})
	var mu sync.Mutex
	relayed := 0 // bytes Receive wrote
	done := make(chan bool)
	go func() {
		done <- f.Receive(func(b []byte) error {
			mu.Lock()
			relayed += len(b)
			mu.Unlock()
			_, err := w.Write(b)
			return err
		}, false)
	}()
	// Small chunks while the pipe has room: all written by Push.
	var want []byte
	for i := range 10 {
		b := bytes.Repeat([]byte{byte('a' + i)}, 10)
		want = append(want, b...)
		f.Push(b)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("small chunks: read %q, %v; want %q", got, err, want)
	}
	mu.Lock()
	if relayed != 0 {
		t.Errorf("Receive wrote %d bytes of chunks Push could write itself", relayed)
	}
	mu.Unlock()
	// More than the pipe holds, nobody reading: the rest queues for
	// Receive (which waits for room), in order after what Push wrote.
	want = want[:0]
	total := 2*CreditBatch - 100
	for i := 0; len(want) < total; i++ {
		b := bytes.Repeat([]byte{byte('A' + i%26)}, min(ChunkSize-i%7, total-len(want)))
		want = append(want, b...)
		f.Push(b)
	}
	got = make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("large chunks: %d bytes read, %v; in order: %v", len(got), err, bytes.Equal(got, want))
	}
	mu.Lock()
	if relayed == 0 || relayed == len(want) {
		t.Errorf("Receive wrote %d of %d bytes: want a part (the pipe was full)", relayed, len(want))
	}
	mu.Unlock()
	f.Push(nil)
	if !<-done {
		t.Fatal("Receive did not report the EOF")
	}
	var sum uint32
	for _, fr := range out.read(t) {
		n, err := ParseU32(fr.Payload)
		if fr.Type != Credit || err != nil {
			t.Fatalf("unexpected %v frame", fr.Type)
		}
		sum += n
	}
	f.mu.Lock()
	owed, held := f.owed, f.held
	f.mu.Unlock()
	if int(sum)+int(owed) != 100+total || owed >= CreditBatch || held != owed {
		t.Errorf("%d bytes credited, %d owed, %d held; want %d written in all, less than %d owed, all of it held", sum, owed, held, 100+total, CreditBatch)
	}
}
