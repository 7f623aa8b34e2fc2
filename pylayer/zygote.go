package pylayer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/diskcache"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/transport"
)

// The zygote protocol of the eval layer (see py/zygote.py). After the layer's
// frames (code, configuration) the zygote asks for its setup (NEED); the host
// answers with SETUP (the eval guard's modules, its entry module, the profiles,
// the modules to import before the first fork). The zygote says READY, then
// serves EVAL frames, several at once: each is handed to a process forked from
// the zygote, whose output (STDOUT, STDERR), result (RESULT, a protocol 5 pickle)
// or exception (EXC, a JSON descriptor) come back tagged with the evaluation's
// id, or ENDED when the process ended without a result (a hard limit, a
// cancellation, a crash). CANCEL asks the zygote to kill an evaluation's process.
// The zygote is trusted to relay, not to tell the truth: every frame is bounded
// and checked, and anything out of protocol ends the channel.

// Frame kinds of the zygote protocol.
const (
	kindSetup      = 32 // host -> zygote: modules, entry, profiles, preload (marshal)
	kindEval       = 33 // host -> zygote: one evaluation
	kindCancel     = 34 // host -> zygote: kill an evaluation
	kindZReady     = 40 // zygote -> host: ready (JSON)
	kindNeed       = 41 // zygote -> host: asks for SETUP
	kindEvalStdout = 42 // zygote -> host: id + text
	kindEvalStderr = 43 // zygote -> host: id + text
	kindEvalResult = 44 // zygote -> host: id + pickle
	kindEvalExc    = 45 // zygote -> host: id + JSON descriptor
	kindEvalEnded  = 46 // zygote -> host: id + JSON end
)

// evalHead is the fixed part of an EVAL frame.
const evalHead = 33

// DefaultCancelGrace is how long Zygote.Eval waits, once its context has
// ended, for the zygote to confirm that the evaluation's process is gone.
const DefaultCancelGrace = time.Second

var (
	// ErrCancelUnconfirmed reports an evaluation whose process the zygote did
	// not confirm killed within the grace period: the caller must end the zygote.
	ErrCancelUnconfirmed = errors.New("the zygote did not confirm the end of the evaluation")
	// ErrZygoteExited reports a zygote whose channel ended before it answered.
	ErrZygoteExited = errors.New("the eval zygote exited")
)

// ZygoteOptions configure a zygote.
type ZygoteOptions struct {
	// Guard arms the Python layer's guard in each evaluation's process (false:
	// the OS provider and the eval guard only, as with py-sandbox=false).
	Guard bool
	// Single makes the process serve one evaluation itself instead of forking:
	// the fallback where forking is not possible.
	Single bool
	// Pool is how many forked processes the zygote keeps ready (at least 1);
	// it is also how many evaluations should run at once.
	Pool int
	// MaxResult bounds one result's pickle (DefaultMaxResult when 0).
	MaxResult int
	// Modules is the marshal of {module name: code object or source} that
	// CompileModules made; "pkg.__init__" names a package.
	Modules []byte
	// Entry is the module whose run(src, names, profile, mode, filename)
	// evaluates; its describe(exc), when it has one, gives the plain-data
	// arguments of its own exceptions.
	Entry string
	// Profiles is the pickle (transport.Pickle) of a dict {name: profile}; an
	// evaluation names one of them.
	Profiles []byte
	// Preload are modules imported by the zygote before its first fork (an
	// import that fails is skipped). They are imported before the guard is
	// armed: name only modules the policy lets the evaluated code import.
	Preload []string
	// Stdout and Stderr receive what the zygote prints outside any evaluation
	// (nil discards it).
	Stdout, Stderr io.Writer
}

// EvalRequest is one evaluation.
type EvalRequest struct {
	// Exec runs the source as statements and returns the names it bound
	// (false: evaluates an expression and returns its value).
	Exec bool
	// Profile names one of ZygoteOptions.Profiles.
	Profile string
	// Filename is the name the source has in tracebacks.
	Filename string
	// Source is the code (valid UTF-8, no NUL byte).
	Source string
	// Names is the pickle of a dict of the names the code sees (nil: none).
	Names []byte
	// Timeout is the wall-clock limit: the zygote kills the process past it
	// (0: none). It is counted from the start of the evaluation, in
	// milliseconds.
	Timeout time.Duration
	// CPU bounds the processor time of the evaluation's process (RLIMIT_CPU,
	// rounded up to whole seconds; 0: none).
	CPU time.Duration
	// Memory bounds the address space of the evaluation's process in bytes
	// (RLIMIT_AS; 0: none): an allocation beyond it raises MemoryError.
	Memory uint64
	// Output bounds the bytes the evaluation prints (0: none): past it the
	// zygote kills the process.
	Output int64
}

// EvalException is the descriptor of an exception of an evaluation.
type EvalException struct {
	Exception
	// Budget is "memory" for a MemoryError raised under the memory limit.
	Budget string `json:"budget"`
	// Limit is the memory limit, with Budget.
	Limit int64 `json:"limit"`
	// Guard holds the arguments of an exception of the eval guard itself (as
	// its describe() gives them), as JSON; null otherwise.
	Guard json.RawMessage `json:"guard"`
}

// EvalEnd says how an evaluation's process ended without a result.
type EvalEnd struct {
	// Reason is "timeout", "cancel", "output", "cpu" (RLIMIT_CPU), "died" (it
	// crashed or was killed by someone else), "protocol" (it broke the
	// protocol: killed), "failed" (it could not be started) or "shutdown".
	Reason string `json:"reason"`
	// Signal that ended it (0: it exited), and its exit status.
	Signal int `json:"signal"`
	Status int `json:"status"`
	// CPU is the processor time it used, in seconds.
	CPU float64 `json:"cpu"`
	// Detail is what the process or the zygote said about it.
	Detail string `json:"detail"`
}

// EvalReply is the end of one evaluation: a result pickle, an exception, or
// the end of its process.
type EvalReply struct {
	Result    []byte
	Exception *EvalException
	Ended     *EvalEnd
}

// ZygoteInfo is what the zygote says when it is ready.
type ZygoteInfo struct {
	Pid int `json:"pid"`
	// Fork reports that forking works; when it does not, Reason says why and
	// the zygote serves nothing.
	Fork   bool   `json:"fork"`
	Reason string `json:"reason"`
	// Single reports a process that serves one evaluation itself.
	Single bool `json:"single"`
	Pool   int  `json:"pool"`
}

// Zygote is the host side of one zygote's channel.
type Zygote struct {
	s     *Session
	opts  ZygoteOptions
	w     *transport.Writer
	setup []byte

	ready     chan struct{}
	readyOnce sync.Once
	info      ZygoteInfo

	mu        sync.Mutex
	calls     map[uint64]*zcall
	abandoned map[uint64]bool
	nextID    uint64
	needed    bool
}

type zcall struct {
	out     CallOutput
	written int64
	done    chan *EvalReply
	ended   bool
	over    bool // output limit passed
}

// NewZygote prepares the channel of one zygote process (in.Target is replaced by
// the zygote's).
func NewZygote(ctx context.Context, in ConfigInput, o ZygoteOptions) (*Zygote, error) {
	if o.MaxResult <= 0 {
		o.MaxResult = DefaultMaxResult
	}
	if o.Pool <= 0 {
		o.Pool = 1
	}
	if o.Entry == "" || !validModuleName(o.Entry) {
		return nil, fmt.Errorf("pylayer: zygote: bad entry module %q", o.Entry)
	}
	for _, m := range o.Preload {
		if !validModuleName(m) {
			return nil, fmt.Errorf("pylayer: zygote: bad module name %q", m)
		}
	}
	setup, err := marshalValue(pyDict{
		"modules": pyBytes(o.Modules), "entry": o.Entry, "profiles": pyBytes(o.Profiles),
		"preload": slices.Clone(o.Preload),
	})
	if err != nil {
		return nil, err
	}
	if len(setup)+1 > maxHostFrame {
		return nil, fmt.Errorf("pylayer: zygote: the setup is too large (%d bytes)", len(setup))
	}
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	args := []string{"guard=" + b(o.Guard), "pool=" + strconv.Itoa(o.Pool), "max-result=" + strconv.Itoa(o.MaxResult)}
	// "zygote" forks; "eval" serves one evaluation in its own process (and is
	// never exempt from the guard's checks, as a zygote is: see guard.py).
	kind := "zygote"
	if o.Single {
		kind = "eval"
	}
	in.Target = Target{Kind: kind, Args: args}
	s, err := NewSession(ctx, in)
	if err != nil {
		return nil, err
	}
	z := &Zygote{s: s, opts: o, setup: setup, ready: make(chan struct{}), calls: map[uint64]*zcall{},
		abandoned: map[uint64]bool{}}
	s.onFrame = z.handle
	s.maxFrame = max(maxChildFrame, o.MaxResult+transport.HeaderSize+16)
	z.w = transport.NewWriter(s.ch.Host, maxHostFrame)
	return z, nil
}

func validModuleName(m string) bool {
	if m == "" || len(m) > 256 {
		return false
	}
	for _, part := range bytes.Split([]byte(m), []byte(".")) {
		if len(part) == 0 {
			return false
		}
		for i, c := range part {
			ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
			if !ok {
				return false
			}
		}
	}
	return true
}

// Session is the zygote's channel, as for any program of the layer.
func (z *Zygote) Session() *Session { return z.s }

// Done is closed when the channel has ended.
func (z *Zygote) Done() <-chan struct{} { return z.s.done }

// ExitReason says why the channel ended: the *ProtocolError or *StartError the
// session recorded, else ErrZygoteExited.
func (z *Zygote) ExitReason() error {
	z.s.mu.Lock()
	defer z.s.mu.Unlock()
	switch {
	case z.s.protoErr != nil:
		return z.s.protoErr
	case z.s.fatal != "":
		return &StartError{Msg: z.s.fatal}
	}
	return ErrZygoteExited
}

// Ready waits until the zygote is ready, and returns what it said.
func (z *Zygote) Ready(ctx context.Context) (ZygoteInfo, error) {
	select {
	case <-z.ready:
		return z.info, nil
	case <-z.s.done:
		select {
		case <-z.ready:
			return z.info, nil
		default:
		}
		return ZygoteInfo{}, z.ExitReason()
	case <-ctx.Done():
		return ZygoteInfo{}, ctx.Err()
	}
}

// CloseWrite ends the host's side of the channel: the zygote kills its
// processes and exits.
func (z *Zygote) CloseWrite() { z.s.ch.CloseWrite() }

// Eval sends one evaluation and waits for its end. Output is written to out as
// it arrives. When ctx ends first, Eval asks the zygote to kill the
// evaluation's process and waits (at most DefaultCancelGrace) for it to confirm:
// it returns ctx's error, or ErrCancelUnconfirmed (the caller must then end the
// zygote); in single mode, where the process is the zygote, it returns ctx's
// error at once (the caller ends the process). Other errors: the channel's end
// reason, a write error, or out.LimitErr.
func (z *Zygote) Eval(ctx context.Context, req *EvalRequest, out CallOutput) (*EvalReply, error) {
	frame, err := z.encode(req)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	z.nextID++
	id := z.nextID
	c := &zcall{out: out, done: make(chan *EvalReply, 1)}
	z.calls[id] = c
	z.mu.Unlock()
	binary.BigEndian.PutUint64(frame, id)
	finish := func() {
		z.mu.Lock()
		delete(z.calls, id)
		z.mu.Unlock()
	}
	select {
	case <-z.s.done:
		finish()
		return nil, z.ExitReason()
	default:
	}
	if err := z.w.Write(kindEval, frame); err != nil {
		finish()
		return nil, fmt.Errorf("pylayer: sending the evaluation: %w", err)
	}
	got := func(r *EvalReply) (*EvalReply, error) {
		if r == nil {
			// Past the output limit: the zygote was asked to kill the process;
			// what it still says about it is dropped.
			z.abandon(id)
			return nil, out.LimitErr
		}
		finish()
		return r, nil
	}
	select {
	case r := <-c.done:
		return got(r)
	case <-ctx.Done():
	case <-z.s.done:
		select {
		case r := <-c.done:
			return got(r)
		default:
		}
		finish()
		return nil, z.ExitReason()
	}
	if z.info.Single {
		z.abandon(id)
		return nil, ctx.Err()
	}
	if !z.Cancel(id) {
		finish()
		return nil, ctx.Err()
	}
	t := time.NewTimer(DefaultCancelGrace)
	defer t.Stop()
	select {
	case <-c.done:
		finish()
		return nil, ctx.Err()
	case <-z.s.done:
		finish()
		return nil, ctx.Err()
	case <-t.C:
		z.abandon(id)
		return nil, fmt.Errorf("%w: %w", ErrCancelUnconfirmed, ctx.Err())
	}
}

// Cancel asks the zygote to kill evaluation id's process (false: the request
// could not be sent).
func (z *Zygote) Cancel(id uint64) bool {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	return z.w.Write(kindCancel, b[:]) == nil
}

// abandon forgets a call whose caller has left; what the zygote still sends
// about it is dropped.
func (z *Zygote) abandon(id uint64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.calls[id]; ok {
		delete(z.calls, id)
		if len(z.abandoned) < 1<<16 {
			z.abandoned[id] = true
		}
	}
}

func (z *Zygote) encode(req *EvalRequest) ([]byte, error) {
	if len(req.Profile) > 0xffff || len(req.Filename) > 0xffff {
		return nil, errors.New("pylayer: zygote: profile or file name too long")
	}
	n := evalHead + 2 + len(req.Profile) + 2 + len(req.Filename) + 4 + len(req.Source) + len(req.Names)
	if n+1 > maxHostFrame || len(req.Source) > math.MaxUint32 {
		return nil, fmt.Errorf("pylayer: the evaluation is too large (%d bytes, limit %d)", n, maxHostFrame-1)
	}
	ms := func(d time.Duration) uint32 {
		if d <= 0 {
			return 0
		}
		v := (d + time.Millisecond - 1) / time.Millisecond
		return uint32(min(v, math.MaxUint32))
	}
	secs := func(d time.Duration) uint32 {
		if d <= 0 {
			return 0
		}
		v := (d + time.Second - 1) / time.Second
		return uint32(min(v, math.MaxUint32-1))
	}
	b := make([]byte, evalHead, n)
	binary.BigEndian.PutUint32(b[8:], ms(req.Timeout))
	binary.BigEndian.PutUint32(b[12:], secs(req.CPU))
	binary.BigEndian.PutUint64(b[16:], req.Memory)
	binary.BigEndian.PutUint64(b[24:], uint64(max(req.Output, 0)))
	if req.Exec {
		b[32] = 1
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(req.Profile)))
	b = append(b, req.Profile...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(req.Filename)))
	b = append(b, req.Filename...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(req.Source)))
	b = append(b, req.Source...)
	b = append(b, req.Names...)
	return b, nil
}

// handle reads the frames of the zygote protocol (on the session's reader).
func (z *Zygote) handle(f transport.Frame) error {
	switch f.Kind {
	case kindNeed:
		z.mu.Lock()
		again := z.needed
		z.needed = true
		z.mu.Unlock()
		if again || len(f.Payload) != 0 {
			return errors.New("setup asked twice")
		}
		go func() { _ = z.w.Write(kindSetup, z.setup) }()
		return nil
	case kindZReady:
		var info ZygoteInfo
		if err := strictJSON(f.Payload, &info); err != nil {
			return fmt.Errorf("malformed ready frame: %w", err)
		}
		select {
		case <-z.ready:
			return errors.New("ready frame sent twice")
		default:
		}
		z.info = info
		z.readyOnce.Do(func() { close(z.ready) })
		return nil
	case kindEvalStdout, kindEvalStderr, kindEvalResult, kindEvalExc, kindEvalEnded:
	default:
		return fmt.Errorf("unknown frame kind %d", f.Kind)
	}
	if len(f.Payload) < 8 {
		return fmt.Errorf("frame of kind %d without an evaluation id", f.Kind)
	}
	id := binary.BigEndian.Uint64(f.Payload)
	body := f.Payload[8:]
	if id == 0 {
		switch f.Kind {
		case kindEvalStdout:
			return write(z.opts.Stdout, body)
		case kindEvalStderr:
			return write(z.opts.Stderr, body)
		}
		return fmt.Errorf("frame of kind %d for evaluation 0", f.Kind)
	}
	z.mu.Lock()
	c := z.calls[id]
	gone := z.abandoned[id]
	final := f.Kind == kindEvalResult || f.Kind == kindEvalExc || f.Kind == kindEvalEnded
	if gone && final {
		delete(z.abandoned, id)
	}
	z.mu.Unlock()
	if c == nil {
		if gone {
			return nil
		}
		return fmt.Errorf("frame of kind %d for evaluation %d, which is not running", f.Kind, id)
	}
	if c.ended {
		if c.over {
			return nil // past the output limit: the zygote was asked to kill it
		}
		return fmt.Errorf("frame of kind %d for evaluation %d after its end", f.Kind, id)
	}
	switch f.Kind {
	case kindEvalStdout, kindEvalStderr:
		c.written += int64(len(body))
		if c.out.Limit > 0 && c.written > c.out.Limit {
			c.ended, c.over = true, true
			z.Cancel(id)
			c.done <- nil
			return nil
		}
		dst := c.out.Stdout
		if f.Kind == kindEvalStderr {
			dst = c.out.Stderr
		}
		_ = write(dst, body)
		return nil
	case kindEvalResult:
		c.ended = true
		c.done <- &EvalReply{Result: body}
	case kindEvalExc:
		var e EvalException
		if err := strictJSON(body, &e); err != nil {
			return fmt.Errorf("malformed exception frame: %w", err)
		}
		c.ended = true
		c.done <- &EvalReply{Exception: &e}
	case kindEvalEnded:
		var e EvalEnd
		if err := strictJSON(body, &e); err != nil {
			return fmt.Errorf("malformed end frame: %w", err)
		}
		c.ended = true
		c.done <- &EvalReply{Ended: &e}
	}
	return nil
}

// Denial returns the refusal an evaluation reported whose "Exception: message"
// text is s.
func (z *Zygote) Denial(s string) (Denial, bool) {
	z.s.mu.Lock()
	defer z.s.mu.Unlock()
	for _, d := range z.s.denials {
		if d.Exception+": "+d.Message == s {
			return d, true
		}
	}
	return Denial{}, false
}

// CompileModules returns the marshal of {module name: code object} for the
// sources (module name -> source; "pkg.__init__" for a package), compiled once
// by an unconfined run of the interpreter and kept in the user's cache
// directory (keyed by the interpreter and the sources), or the marshal of the
// sources themselves when that fails (the zygote then compiles them).
func CompileModules(ctx context.Context, in *Interpreter, srcs map[string]string) ([]byte, error) {
	names := make([]string, 0, len(srcs))
	src := pyDict{}
	for n, s := range srcs {
		if !validModuleName(n) {
			return nil, fmt.Errorf("pylayer: bad module name %q", n)
		}
		names = append(names, n)
		src[n] = s
	}
	slices.Sort(names)
	srcBytes, err := marshalValue(src)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(in.Path + "|" + in.Info.Magic + "|" + in.Info.VersionS + "\x00"))
	for _, n := range names {
		h.Write([]byte(n + "\x00" + srcs[n] + "\x00"))
	}
	name := "evalmods-" + in.Info.CacheTag + "-" + hex.EncodeToString(h.Sum(nil)[:12]) + ".marshal"
	dir, derr := diskcache.Dir()
	if derr != nil {
		return srcBytes, nil
	}
	if data, err := diskcache.Read(dir, name, 64<<20); err == nil && len(data) > 0 {
		return data, nil
	}
	// Confined (package hostprobe): the interpreter may be untrusted.
	out, err := hostprobe.Run(ctx, hostprobe.Request{Path: in.Path, Args: []string{in.Path, "-I", "-S", "-c", compileScript},
		Stdin: srcBytes, Timeout: 60 * time.Second, MaxOutput: 64 << 20})
	if err != nil || len(out) == 0 {
		return srcBytes, nil
	}
	if diskcache.Write(dir, name, out) != nil {
		return srcBytes, nil
	}
	return out, nil
}
