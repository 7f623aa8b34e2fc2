package pylayer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/pysandboxes/pysandboxes/transport"
)

// The worker protocol of partial mode (see py/worker.py). After the layer's
// frames (code, configuration; hello when the guard is armed) the worker sends
// READY once its init function has run, then serves CALL frames one at a time:
// while a call runs it sends STDOUT and STDERR frames tagged with the call's id,
// and ends the call with one RESULT (a protocol 5 pickle) or one EXC (a JSON
// exception descriptor). Id 0 is the init function, and output written outside
// any call. Anything else from the child is a protocol error: the host stops
// reading and the worker is killed.

// DefaultMaxResult is the default bound of one call's result pickle.
const DefaultMaxResult = 16 << 20

// MaxCallFrame bounds the frame of one call (function name and arguments).
const MaxCallFrame = maxHostFrame

var (
	// ErrWorkerExited reports a worker whose channel ended (it exited, or was
	// killed) before it answered.
	ErrWorkerExited = errors.New("the worker exited")
	// ErrNotDelivered reports a call that could not be written to the worker: it
	// never ran.
	ErrNotDelivered = errors.New("the call could not be sent to the worker")
)

// WorkerOptions configure a worker.
type WorkerOptions struct {
	// Init is "module:function", run inside after the guard is armed and before
	// the worker says it is ready ("" for none).
	Init string
	// Guard arms the Python layer's guard (false: the worker runs under the OS
	// provider only, as with py-sandbox=false).
	Guard bool
	// MaxResult bounds one result's pickle in bytes (DefaultMaxResult when 0):
	// the worker refuses to send more, and the host to read more.
	MaxResult int
	// Path are directories put first on the worker's sys.path.
	Path []string
	// Stdout and Stderr receive what the worker prints outside any call (its
	// init function included); nil discards it.
	Stdout, Stderr io.Writer
}

// Exception is the descriptor of an exception raised by a called function (or
// by the init function).
type Exception struct {
	Module    string   `json:"module"`
	Qualname  string   `json:"qualname"`
	Message   string   `json:"message"`
	Traceback string   `json:"traceback"`
	Denials   []string `json:"denials"`
	// Base reports a BaseException that is not an Exception (SystemExit,
	// KeyboardInterrupt...).
	Base bool `json:"base"`
	// Kind is "" for an exception of the function; "init" for one of the init
	// function; "unpicklable" when the result could not be pickled;
	// "result-too-large" when its pickle is over the limit.
	Kind string `json:"kind"`
}

// Reply is the end of one call: a result pickle, or an exception.
type Reply struct {
	Result    []byte
	Exception *Exception
}

// CallOutput says where a call's output goes.
type CallOutput struct {
	Stdout, Stderr io.Writer
	// Limit bounds the bytes of output of the call (0: no limit); past it the
	// call fails with LimitErr and the host stops reading (the worker is killed).
	Limit    int64
	LimitErr error
}

// Worker is the host side of one worker's channel.
type Worker struct {
	s         *Session
	opts      WorkerOptions
	w         *transport.Writer
	ready     chan struct{}
	readyErr  *Exception
	readyOnce sync.Once

	mu     sync.Mutex
	cur    *workerCall
	nextID uint64
	pid    int
}

type workerCall struct {
	id      uint64
	out     CallOutput
	written int64
	done    chan callEnd
	ended   bool
}

type callEnd struct {
	reply *Reply
	err   error
}

// NewWorker prepares the channel of one worker process (in.Target is replaced
// by the worker's).
func NewWorker(ctx context.Context, in ConfigInput, o WorkerOptions) (*Worker, error) {
	if o.MaxResult <= 0 {
		o.MaxResult = DefaultMaxResult
	}
	if strings.ContainsAny(o.Init, "\x00") {
		return nil, errors.New("pylayer: bad init function name")
	}
	guard := "0"
	if o.Guard {
		guard = "1"
	}
	args := []string{"guard=" + guard, "max-result=" + strconv.Itoa(o.MaxResult)}
	for _, p := range o.Path {
		args = append(args, "path="+p)
	}
	in.Target = Target{Kind: "worker", Value: o.Init, Args: args}
	s, err := NewSession(ctx, in)
	if err != nil {
		return nil, err
	}
	w := &Worker{s: s, opts: o, ready: make(chan struct{})}
	s.onFrame = w.handle
	s.maxFrame = max(maxChildFrame, o.MaxResult+transport.HeaderSize+8)
	w.w = transport.NewWriter(s.ch.Host, maxHostFrame)
	return w, nil
}

// Session is the worker's channel, as for any program of the layer.
func (w *Worker) Session() *Session { return w.s }

// Done is closed when the channel has ended (the worker exited or broke the
// protocol).
func (w *Worker) Done() <-chan struct{} { return w.s.done }

// Pid is the worker's process id as it reported it (0 before it is ready).
func (w *Worker) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pid
}

// ExitReason says why the channel ended: the *ProtocolError or *StartError the
// session recorded, else ErrWorkerExited.
func (w *Worker) ExitReason() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	switch {
	case w.s.protoErr != nil:
		return w.s.protoErr
	case w.s.fatal != "":
		return &StartError{Msg: w.s.fatal}
	}
	return ErrWorkerExited
}

// InitError is the exception of a worker's init function.
type InitError struct {
	Exception *Exception
}

func (e *InitError) Error() string {
	return fmt.Sprintf("pysandboxes: the init function raised %s: %s", e.Exception.Qualname, e.Exception.Message)
}

// Ready waits until the worker is ready for calls. It returns an *InitError
// when the init function raised, the channel's end reason when the worker
// ended first, or the context's error.
func (w *Worker) Ready(ctx context.Context) error {
	select {
	case <-w.ready:
	case <-w.s.done:
		select {
		case <-w.ready:
		default:
			return w.ExitReason()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.readyErr != nil {
		return &InitError{Exception: w.readyErr}
	}
	return nil
}

// CloseWrite ends the host's side of the channel: an idle worker then exits
// (status 0) after what it is doing.
func (w *Worker) CloseWrite() { w.s.ch.CloseWrite() }

// Call sends one call (fn is "module:qualname", args the pickle of the
// (args, kwargs) pair) and waits for its end. Output is written to out as it
// arrives, before Call returns. The error is ctx's (the caller must then kill
// the worker: the call may still run), ErrNotDelivered (the call never reached
// the worker), the channel's end reason, or out.LimitErr.
func (w *Worker) Call(ctx context.Context, fn string, args []byte, out CallOutput) (*Reply, error) {
	if len(fn) > 0xffff {
		return nil, errors.New("pylayer: function name too long")
	}
	if len(fn)+len(args)+10+1 > maxHostFrame {
		return nil, fmt.Errorf("pylayer: the call's arguments are too large (%d bytes, limit %d)", len(args), maxHostFrame-len(fn)-11)
	}
	w.mu.Lock()
	if w.cur != nil {
		w.mu.Unlock()
		return nil, errors.New("pylayer: the worker is busy")
	}
	w.nextID++
	c := &workerCall{id: w.nextID, out: out, done: make(chan callEnd, 1)}
	w.cur = c
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.cur == c {
			w.cur = nil
		}
		w.mu.Unlock()
	}()

	frame := make([]byte, 10+len(fn)+len(args))
	binary.BigEndian.PutUint64(frame, c.id)
	binary.BigEndian.PutUint16(frame[8:], uint16(len(fn)))
	copy(frame[10:], fn)
	copy(frame[10+len(fn):], args)
	select {
	case <-w.s.done:
		return nil, fmt.Errorf("%w: %w", ErrNotDelivered, w.ExitReason())
	default:
	}
	if err := w.w.Write(kindCall, frame); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotDelivered, err)
	}
	select {
	case e := <-c.done:
		return e.reply, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-w.s.done:
		select {
		case e := <-c.done:
			return e.reply, e.err
		default:
		}
		return nil, w.ExitReason()
	}
}

// handle reads the frames of the worker protocol (on the session's reader).
func (w *Worker) handle(f transport.Frame) error {
	switch f.Kind {
	case kindReady:
		var r struct {
			Pid int `json:"pid"`
		}
		if err := strictJSON(f.Payload, &r); err != nil {
			return fmt.Errorf("malformed ready frame: %w", err)
		}
		if w.isReady() {
			return errors.New("ready frame sent twice")
		}
		w.mu.Lock()
		w.pid = r.Pid
		w.mu.Unlock()
		w.readyOnce.Do(func() { close(w.ready) })
		return nil
	case kindStdout, kindStderr, kindResult, kindExc:
	default:
		return fmt.Errorf("unknown frame kind %d", f.Kind)
	}
	if len(f.Payload) < 8 {
		return fmt.Errorf("frame of kind %d without a call id", f.Kind)
	}
	id := binary.BigEndian.Uint64(f.Payload)
	body := f.Payload[8:]
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if id == 0 {
		switch f.Kind {
		case kindStdout:
			return write(w.opts.Stdout, body)
		case kindStderr:
			return write(w.opts.Stderr, body)
		case kindExc:
			if w.isReady() {
				return errors.New("init exception frame after ready")
			}
			var e Exception
			if err := strictJSON(body, &e); err != nil {
				return fmt.Errorf("malformed exception frame: %w", err)
			}
			w.readyErr = &e
			w.readyOnce.Do(func() { close(w.ready) })
			return nil
		}
		return fmt.Errorf("frame of kind %d for call 0", f.Kind)
	}
	if c == nil || c.ended || id != c.id {
		return fmt.Errorf("frame of kind %d for call %d, which is not running", f.Kind, id)
	}
	switch f.Kind {
	case kindStdout, kindStderr:
		c.written += int64(len(body))
		if c.out.Limit > 0 && c.written > c.out.Limit {
			c.ended = true
			c.done <- callEnd{err: c.out.LimitErr}
			return fmt.Errorf("call %d: %w", id, c.out.LimitErr)
		}
		dst := c.out.Stdout
		if f.Kind == kindStderr {
			dst = c.out.Stderr
		}
		_ = write(dst, body) // a failing writer loses output, not the call
		return nil
	case kindResult:
		c.ended = true
		c.done <- callEnd{reply: &Reply{Result: body}}
	case kindExc:
		var e Exception
		if err := strictJSON(body, &e); err != nil {
			return fmt.Errorf("malformed exception frame: %w", err)
		}
		c.ended = true
		c.done <- callEnd{reply: &Reply{Exception: &e}}
	}
	return nil
}

func (w *Worker) isReady() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

func write(dst io.Writer, b []byte) error {
	if dst != nil && len(b) > 0 {
		_, _ = dst.Write(b)
	}
	return nil
}

// Denial returns the refusal the worker reported whose "Exception: message"
// text is s (as pysandboxes.sandbox_denials spells it).
func (w *Worker) Denial(s string) (Denial, bool) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	for _, d := range w.s.denials {
		if d.Exception+": "+d.Message == s {
			return d, true
		}
	}
	return Denial{}, false
}
