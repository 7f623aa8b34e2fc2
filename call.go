package pysandboxes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/pylayer"
	"github.com/pysandboxes/pysandboxes/transport"
)

// CallOptions are the options of one call (CallWith).
type CallOptions struct {
	// Kwargs are the keyword arguments (encoded like the positional ones).
	Kwargs map[string]any
	// Timeout bounds the call once a worker runs it (0: the sandbox's
	// CallConfig.Timeout, else none: ctx alone bounds it). Past it the worker is
	// killed and replaced, and the call fails with an error wrapping
	// context.DeadlineExceeded.
	Timeout time.Duration
	// Stdout and Stderr stream what the function prints on sys.stdout and
	// sys.stderr, as it prints it, before the call returns. A stream without a
	// writer is captured (see Output), unless the sandbox streams it
	// (CallConfig.Stdout) and Capture is nil. A call with a captured stream is
	// bounded, both streams together, by Limits.Output, else DefaultCallOutput.
	Stdout, Stderr io.Writer
	// Capture, when set, receives what the call printed on the streams that
	// have no writer here, whether the call succeeded or failed (what was
	// printed before the failure); it overrides the sandbox's CallConfig.Stdout.
	// Without it, captured output is kept for the error only
	// (RemoteError.Output).
	Capture *Output
}

// Call calls the Python function fn ("package.module:qualname") with args in a
// sandboxed worker and returns its result. See CallWith.
func (s *Sandbox) Call(ctx context.Context, fn string, args ...any) (any, error) {
	return s.CallWith(ctx, fn, CallOptions{}, args...)
}

// CallWith calls the Python function fn ("package.module:qualname", a function
// at module level or a method reached through classes, sync or async) in a
// sandboxed Python worker: a Python process started as Sandbox.Python starts
// one (the OS provider, the Python layer with the policy's rules), kept and
// reused for the next calls. The worker imports the module (an import the host
// asks for, not charged to python-import=; what the module imports is) and
// calls the function: a coroutine function runs to completion in an event loop
// the worker keeps; a generator function is refused with a TypeError.
//
// The arguments are encoded with transport.Pickle (the Go types listed at
// transport.Tuple, plus the conveniences of transport.PickleWith): an argument
// outside that mapping is refused before anything is sent. The result comes back
// as a protocol 5 pickle decoded by transport.Unpickle in the policy's
// remote-result-mode: data-only (the default) refuses anything but data types
// with a *ResultError naming module.name; objects returns other values as inert
// transport.Object trees, which are never called. In objects mode,
// remote-result-guard=true (the default) also refuses a result that names a
// module or builtin of the upstream denylist (os, posix, subprocess, sys,
// builtins.eval, pickle, socket, ...): such names are harmless in Go, but only a
// child forging gadgets would return them, so the call fails and the worker is
// replaced; remote-result-guard=false returns them as inert values too.
//
// What the function prints is captured by default, never written to the
// host's own standard output: CallOptions.Capture receives it, a
// *RemoteError carries it (Output), and it is bounded (Limits.Output, else
// DefaultCallOutput). CallOptions.Stdout and Stderr, or CallConfig.Stdout,
// stream it to writers instead. transport.JSON converts the result to JSON.
//
// Errors:
//   - *RemoteError: the function raised; errors.Is(err, ErrDenied) when the
//     exception, or one in its __cause__/__context__ chain, is a refusal of the
//     sandbox.
//   - *ResultError: the result could not be sent or decoded (too large,
//     refused by the result mode, malformed).
//   - *WorkerError: the worker could not serve the call (it died during the
//     call, could not start, its init function raised, it broke the protocol,
//     or it failed too often: ErrRestartLimit).
//   - ctx's error, wrapped, when ctx ended or the timeout passed: the worker was
//     killed and is replaced.
//   - a *transport.PickleError, wrapped, for an argument that cannot be encoded.
//   - ErrSandboxClosed after Close.
func (s *Sandbox) CallWith(ctx context.Context, fn string, o CallOptions, args ...any) (any, error) {
	if err := checkFunc(fn); err != nil {
		return nil, err
	}
	payload, err := encodeCall(fn, args, o.Kwargs)
	if err != nil {
		return nil, err
	}
	p, err := s.calls.pool(s)
	if err != nil {
		return nil, err
	}
	if !p.enter() {
		return nil, ErrSandboxClosed
	}
	defer p.sup.Leave()
	for attempt := 0; ; attempt++ {
		wp, err := p.acquire(ctx, fn)
		if err != nil {
			return nil, err
		}
		v, err, retry := p.run(ctx, wp, fn, payload, o)
		p.release(wp)
		if retry && attempt < 2 {
			continue
		}
		return v, err
	}
}

// checkFunc checks "module:qualname".
func checkFunc(fn string) error {
	mod, qual, ok := strings.Cut(fn, ":")
	bad := !ok || mod == "" || qual == ""
	for _, part := range append(strings.Split(mod, "."), strings.Split(qual, ".")...) {
		if !validIdentifier(part) {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("pysandboxes: %q is not a function name of the form package.module:qualname", fn)
	}
	return nil
}

func validIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80:
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// encodeCall pickles the positional arguments (a tuple) then the keyword
// arguments (a dict, by name), two pickles one after the other.
func encodeCall(fn string, args []any, kwargs map[string]any) ([]byte, error) {
	limit := pylayer.MaxCallFrame - len(fn) - 16
	a, err := transport.PickleWith(transport.Tuple(args), &transport.PickleOptions{MaxBytes: limit, Root: "args"})
	if err != nil {
		return nil, fmt.Errorf("pysandboxes: call %s: %w", fn, err)
	}
	for k := range kwargs {
		if !validIdentifier(k) {
			return nil, fmt.Errorf("pysandboxes: call %s: keyword argument %q is not a Python identifier", fn, k)
		}
	}
	// A map pickles as a dict in sorted key order.
	b, err := transport.PickleWith(kwargs, &transport.PickleOptions{MaxBytes: max(limit-len(a), 64), Root: "kwargs"})
	if err != nil {
		return nil, fmt.Errorf("pysandboxes: call %s: %w", fn, err)
	}
	return append(a, b...), nil
}

var (
	// ErrDenied matches (errors.Is) a *RemoteError whose exception is, or was
	// caused by, a refusal of the sandbox.
	ErrDenied = errors.New("pysandboxes: denied by the sandbox")
	// ErrSandboxClosed reports a call made after Close, or cut by it.
	ErrSandboxClosed = errors.New("pysandboxes: the sandbox is closed")
	// ErrRestartLimit reports a worker that failed too often (RestartPolicy):
	// calls fail at once until the window lets a restart again.
	ErrRestartLimit = errors.New("the Python worker failed too often: restarts are suspended")
	// ErrResultTooLarge reports a result whose pickle is over CallConfig.MaxResult:
	// the worker refused to send it.
	ErrResultTooLarge = errors.New("result too large")
	// ErrWorkerExited reports a worker that ended during a call (it crashed, or
	// was killed by a signal or a resource limit).
	ErrWorkerExited = pylayer.ErrWorkerExited
)

// RemoteError is a Python exception raised by a called function (or by the init
// function, inside a *WorkerError), as the worker described it.
type RemoteError struct {
	// Func is the function called ("module:qualname").
	Func string
	// Module and Qualname are the exception's class (builtins, ValueError).
	Module, Qualname string
	// Message is str(exception).
	Message string
	// Traceback is the formatted remote traceback (the sandbox's own frames
	// left out), ending with the exception line.
	Traceback string
	// Denials are the refusals of the sandbox found in the exception and its
	// __cause__/__context__/ExceptionGroup chain, innermost first, with their
	// rule and file(line) when the worker reported them.
	Denials []Denial
	// Base reports a BaseException that is not an Exception (SystemExit,
	// KeyboardInterrupt): it ended the call, not the worker.
	Base bool
	// Output is what the function (or the evaluated code) printed before it
	// raised, on the streams that were captured (see Output); empty for a
	// stream given a writer.
	Output Output
}

// Class is the exception's class as Python prints it: "ValueError",
// "pysandboxes.RuleFileNotFoundError", "mypkg.errors.Failed".
func (e *RemoteError) Class() string {
	if e.Module == "" || e.Module == "builtins" || e.Module == "__main__" {
		return e.Qualname
	}
	return e.Module + "." + e.Qualname
}

func (e *RemoteError) Error() string {
	s := fmt.Sprintf("pysandboxes: %s raised %s: %s", e.Func, e.Class(), e.Message)
	if len(e.Denials) > 0 {
		s += " (denied by the sandbox)"
	}
	return s
}

// Denied reports whether the exception is, or was caused by, a refusal of the
// sandbox (as opposed to an ordinary failure of the function).
func (e *RemoteError) Denied() bool { return len(e.Denials) > 0 }

// Is makes errors.Is(err, ErrDenied) true for a denial.
func (e *RemoteError) Is(target error) bool { return target == ErrDenied && e.Denied() }

// ResultError reports a result that could not reach the caller: Err is
// ErrResultTooLarge, a *transport.UnpickleError (refused by the result mode, or
// malformed), or a refusal of remote-result-guard (wrapping
// transport.ErrForbiddenGlobal).
type ResultError struct {
	Func string
	Err  error
}

func (e *ResultError) Error() string {
	return fmt.Sprintf("pysandboxes: the result of %s cannot be used: %v", e.Func, e.Err)
}

func (e *ResultError) Unwrap() error { return e.Err }

// WorkerError reports a worker that could not serve a call. Err is
// ErrRestartLimit, ErrWorkerExited, a *pylayer.ProtocolError (the worker broke
// the channel's rules), a *pylayer.StartError, a *RemoteError (its init function
// raised), or the error of starting the process.
type WorkerError struct {
	// Func is the function called ("" when no call was running).
	Func string
	Err  error
}

func (e *WorkerError) Error() string {
	what := "the Python worker"
	if e.Func != "" {
		what = "call " + e.Func + ": the Python worker"
	}
	return fmt.Sprintf("pysandboxes: %s failed: %v", what, e.Err)
}

func (e *WorkerError) Unwrap() error { return e.Err }

// remoteError builds the error of an exception descriptor.
func remoteError(fn string, x *pylayer.Exception, w *pylayer.Worker) *RemoteError {
	e := &RemoteError{Func: fn, Module: x.Module, Qualname: x.Qualname, Message: x.Message, Traceback: x.Traceback, Base: x.Base}
	for _, s := range x.Denials {
		if d, ok := w.Denial(s); ok {
			e.Denials = append(e.Denials, d)
			continue
		}
		exc, msg, _ := strings.Cut(s, ": ")
		e.Denials = append(e.Denials, Denial{Exception: exc, Message: msg})
	}
	return e
}

// decodeResult decodes a result pickle in the sandbox's mode.
func (s *Sandbox) decodeResult(fn string, data []byte, learning bool, maxBytes int) (any, error, bool) {
	mode := transport.DataOnly
	guard := true
	if m, _ := s.policy.RemoteResultMode(); m == policy.Objects {
		mode = transport.Objects
	}
	guard, _ = s.policy.RemoteResultGuard()
	if learning {
		mode, guard = transport.Objects, false // learning refuses nothing
	}
	v, err := transport.Unpickle(data, &transport.UnpickleOptions{Mode: mode, MinProtocol: 5, MaxBytes: maxBytes})
	if err != nil {
		// The C pickler never writes these: the worker misbehaves.
		bad := errors.Is(err, transport.ErrTruncated) || errors.Is(err, transport.ErrMalformed) || errors.Is(err, transport.ErrForbiddenOpcode)
		return nil, &ResultError{Func: fn, Err: err}, bad
	}
	if mode == transport.Objects && guard {
		if name := gadget(v); name != "" {
			return nil, &ResultError{Func: fn, Err: fmt.Errorf("%w: the result names %s, refused by remote-result-guard (remote-result-guard=false returns it as an inert value)", transport.ErrForbiddenGlobal, name)}, true
		}
	}
	return v, nil, false
}

// deniedRoots are the module roots of the upstream remote-result-guard denylist.
var deniedRoots = map[string]bool{
	"posix": true, "nt": true, "os": true, "subprocess": true, "pty": true, "sys": true, "importlib": true,
	"runpy": true, "socket": true, "_socket": true, "_thread": true, "threading": true, "ctypes": true,
	"_ctypes": true, "mmap": true, "operator": true, "_operator": true, "functools": true, "_functools": true,
	"pdb": true, "platform": true, "webbrowser": true, "code": true, "codeop": true, "timeit": true,
	"shutil": true, "io": true, "_io": true, "codecs": true, "_codecs": true, "logging": true, "signal": true,
	"_signal": true, "tempfile": true, "pickle": true, "_pickle": true, "copyreg": true, "marshal": true,
	"types": true, "multiprocessing": true, "asyncio": true, "gc": true, "inspect": true, "ssl": true,
	"_posixsubprocess": true, "select": true, "fcntl": true, "resource": true, "pathlib": true,
}

// allowedBuiltins are the builtins a result may name in objects mode (with the
// exception classes); every other builtin (eval, exec, getattr, open,
// __import__, type...) is refused by remote-result-guard.
var allowedBuiltins = map[string]bool{
	"complex": true, "set": true, "frozenset": true, "bytearray": true, "bytes": true, "range": true,
	"object": true, "int": true, "float": true, "str": true, "list": true, "dict": true, "tuple": true,
	"bool": true, "slice": true,
}

// gadget returns the first denied name found in an objects-mode value ("" when
// none); a value too deeply nested to be walked is refused whole.
func gadget(v any) string {
	var name string
	err := transport.Walk(v, func(x any, _ int) error {
		switch x := x.(type) {
		case transport.Global:
			name = deniedName(x.Module, x.Name)
		case transport.Object:
			name = deniedName(x.Module, x.Name)
		}
		if name != "" {
			return errGadget
		}
		return nil
	})
	if err != nil && name == "" {
		return "a value nested too deeply to be checked"
	}
	return name
}

var errGadget = errors.New("denied name")

// deniedName returns module.name when remote-result-guard refuses it ("" when
// it does not).
func deniedName(module, name string) string {
	root, _, _ := strings.Cut(module, ".")
	if deniedRoots[root] && !(root == "pathlib" && isPathClass(name)) {
		return module + "." + name
	}
	if (module == "builtins" || module == "__builtin__") && !allowedBuiltins[name] && !isExceptionName(name) {
		return module + "." + name
	}
	return ""
}

func isPathClass(name string) bool {
	switch name {
	case "PurePosixPath", "PosixPath", "PureWindowsPath", "WindowsPath", "PurePath", "Path":
		return true
	}
	return false
}

func isExceptionName(name string) bool {
	return strings.HasSuffix(name, "Error") || strings.HasSuffix(name, "Exception") || strings.HasSuffix(name, "Warning")
}

// needsObjects tells whether a result pickle names anything outside the data
// types: what learning records as remote-result-mode=objects. A result the
// decoder refuses needs nothing (the call fails whatever the mode).
func needsObjects(data []byte) bool {
	v, err := transport.Unpickle(data, &transport.UnpickleOptions{Mode: transport.Objects, MinProtocol: 5, MaxBytes: len(data)})
	return err == nil && transport.HoldsObjects(v)
}
