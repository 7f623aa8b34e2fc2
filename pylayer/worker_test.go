package pylayer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/transport"
)

// newTestWorker is a Worker with no process: its handler is fed by hand.
func newTestWorker() *Worker {
	s := &Session{seen: map[string]bool{}, done: make(chan struct{})}
	s.obs.init()
	w := &Worker{s: s, ready: make(chan struct{})}
	s.onFrame = w.handle
	return w
}

func frame(kind byte, id uint64, body string) transport.Frame {
	p := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint64(p, id)
	return transport.Frame{Kind: transport.Kind(kind), Payload: append(p, body...)}
}

// TestWorkerHandlerRefusesWhatBreaksTheProtocol: frames of unknown kinds,
// without an id, for a call that is not running, malformed descriptors and a
// second ready are protocol errors (the session then kills the worker).
func TestWorkerHandlerRefusesWhatBreaksTheProtocol(t *testing.T) {
	w := newTestWorker()
	bad := []struct {
		name string
		f    transport.Frame
	}{
		{"unknown kind", transport.Frame{Kind: 99, Payload: []byte("x")}},
		{"no id", transport.Frame{Kind: kindResult, Payload: []byte("1234")}},
		{"result of no call", frame(kindResult, 7, "\x80\x05N.")},
		{"stdout of no call", frame(kindStdout, 7, "x")},
		{"result for call 0", frame(kindResult, 0, "\x80\x05N.")},
		{"malformed ready", transport.Frame{Kind: kindReady, Payload: []byte("{pid")}},
		{"ready with unknown fields", transport.Frame{Kind: kindReady, Payload: []byte(`{"pid":1,"x":2}`)}},
		{"malformed init exception", frame(kindExc, 0, "{")},
	}
	for _, b := range bad {
		if err := w.handle(b.f); err == nil {
			t.Errorf("%s: accepted", b.name)
		}
	}
	if err := w.handle(transport.Frame{Kind: kindReady, Payload: []byte(`{"pid":42}`)}); err != nil {
		t.Fatal(err)
	}
	if w.Pid() != 42 || w.Ready(context.Background()) != nil {
		t.Errorf("ready: pid %d", w.Pid())
	}
	if err := w.handle(transport.Frame{Kind: kindReady, Payload: []byte(`{"pid":42}`)}); err == nil {
		t.Error("a second ready was accepted")
	}
	if err := w.handle(frame(kindExc, 0, `{"module":"a","qualname":"b","message":"","traceback":"","denials":[],"base":false,"kind":"init"}`)); err == nil {
		t.Error("an init exception after ready was accepted")
	}
}

// TestWorkerHandlerCall: a call's output and end reach its caller; frames with
// another id, or after its end, are refused; the output limit ends the call.
func TestWorkerHandlerCall(t *testing.T) {
	w := newTestWorker()
	w.handle(transport.Frame{Kind: kindReady, Payload: []byte(`{"pid":1}`)})
	var out, errb bytes.Buffer
	c := &workerCall{id: 3, out: CallOutput{Stdout: &out, Stderr: &errb, Limit: 10, LimitErr: errors.New("limit")}, done: make(chan callEnd, 1)}
	w.cur = c
	for _, f := range []transport.Frame{frame(kindStdout, 3, "ab"), frame(kindStderr, 3, "cd")} {
		if err := w.handle(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.handle(frame(kindStdout, 4, "x")); err == nil {
		t.Error("output of another call was accepted")
	}
	if err := w.handle(frame(kindExc, 3, `{"module":"builtins","qualname":"ValueError","message":"m","traceback":"tb","denials":["RuleX: y"],"base":false,"kind":""}`)); err != nil {
		t.Fatal(err)
	}
	e := <-c.done
	if e.err != nil || e.reply.Exception == nil || e.reply.Exception.Qualname != "ValueError" || e.reply.Exception.Denials[0] != "RuleX: y" {
		t.Errorf("end = %+v", e)
	}
	if out.String() != "ab" || errb.String() != "cd" {
		t.Errorf("output %q %q", out.String(), errb.String())
	}
	if err := w.handle(frame(kindResult, 3, "\x80\x05N.")); err == nil {
		t.Error("a second end of the call was accepted")
	}
	// The limit.
	c = &workerCall{id: 5, out: CallOutput{Stdout: &out, Limit: 3, LimitErr: errors.New("limit")}, done: make(chan callEnd, 1)}
	w.cur = c
	if err := w.handle(frame(kindStdout, 5, "abcd")); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("output over the limit: %v", err)
	}
	if e := <-c.done; e.err == nil || e.err.Error() != "limit" {
		t.Errorf("end = %+v", e)
	}
}

// TestWorkerCallEndsWithTheChannel: a call waiting for a worker whose channel
// ends returns the reason; one whose context ends returns the context's error.
func TestWorkerCallEndsWithTheChannel(t *testing.T) {
	w := newTestWorker()
	var sink bytes.Buffer
	w.w = transport.NewWriter(&sink, maxHostFrame)
	close(w.ready)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.Call(ctx, "m:f", []byte("x"), CallOutput{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call past its context = %v", err)
	}
	if sink.Len() == 0 {
		t.Error("no call frame written")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.s.mu.Lock()
		w.s.protoErr = &ProtocolError{Err: errors.New("garbage")}
		w.s.mu.Unlock()
		close(w.s.done)
	}()
	_, err := w.Call(context.Background(), "m:f", nil, CallOutput{})
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Errorf("Call on a broken channel = %v", err)
	}
	if _, err := w.Call(context.Background(), "m:f", nil, CallOutput{}); !errors.Is(err, ErrNotDelivered) {
		t.Errorf("Call on a closed channel = %v", err)
	}
	if _, err := w.Call(context.Background(), "m:f", make([]byte, maxHostFrame), CallOutput{}); err == nil {
		t.Error("arguments over the frame bound were accepted")
	}
}

// TestWorkerModuleIsEmbedded: the worker ships with the layer's modules.
func TestWorkerModuleIsEmbedded(t *testing.T) {
	srcs, _ := moduleSources()
	if !strings.Contains(srcs["worker"], "def main(") || !strings.Contains(srcs["boot"], "kind == 'worker'") {
		t.Error("the worker module is not embedded, or boot does not start it")
	}
}
