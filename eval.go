package pysandboxes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/internal/pypool"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/pylayer"
	"github.com/pysandboxes/pysandboxes/transport"
)

// Defaults of the eval layer.
const (
	// DefaultEvalMemory bounds the address space of an evaluation's process
	// (the interpreter included, which takes some tens of megabytes of it).
	DefaultEvalMemory = 1 << 30
	// DefaultEvalOutput bounds what an evaluation prints, when the sandbox's
	// Limits.Output does not.
	DefaultEvalOutput = 1 << 20
	// MaxEvalSource bounds the source of an evaluation in bytes (the profile's
	// eval-max-nodes bounds it further, in the guard).
	MaxEvalSource = 4 << 20
	// evalGrace is how long past an evaluation's timeout the host waits for its
	// zygote to report the end, before it kills the zygote (the zygote counts
	// the timeout from the moment one of its processes takes the evaluation,
	// which may wait for a process to be forked).
	evalGrace = 10 * time.Second
)

// EvalLimits are the hard limits of each evaluation, enforced on its process
// (beyond the budgets of its eval profile, which the guard charges).
type EvalLimits struct {
	// Memory bounds the address space of the evaluation's process in bytes
	// (RLIMIT_AS; DefaultEvalMemory when 0): an allocation past it raises
	// MemoryError, reported as an *evalguard.InterruptedError whose Budget is
	// "memory".
	Memory uint64
	// CPU bounds the processor time of the process (RLIMIT_CPU, whole seconds;
	// 0: the profile's eval-timeout plus a second, so that the wall clock ends
	// it first): past it the kernel kills it, reported with Budget "cpu".
	CPU time.Duration
	// Output bounds the bytes the evaluation prints (0: the sandbox's
	// Limits.Output, else DefaultEvalOutput): past it the process is killed,
	// reported with Budget "output".
	Output int64
}

// evalConfig holds the eval options of a sandbox.
type evalConfig struct {
	pool   int
	noFork bool
	limits EvalLimits
}

// EvalConfig configures the eval layer (Eval and Exec): WithEval sets it. A
// zero field keeps the default. What the eval zygote shares with the workers
// of Call (its directory, output, restart policy, start timeout, close grace
// and result bound) is set by WithCall.
type EvalConfig struct {
	// Pool is how many evaluations run at once (default 1): the zygote keeps
	// as many processes forked and ready, and an evaluation beyond waits.
	Pool int
	// NoFork turns the zygote off: each evaluation then starts a fresh
	// interpreter of its own, about the start-up of a sandboxed interpreter per
	// evaluation instead of a fork. By default the zygote is used, which falls
	// back to fresh interpreters by itself when forking does not work in the
	// sandbox.
	NoFork bool
	// Limits are the hard limits of every evaluation (EvalMemory, EvalCPU and
	// EvalMaxOutput override them for one).
	Limits EvalLimits
}

// WithEval sets the configuration of the eval layer: the fields of ec that
// are not zero (several WithEval add up).
func WithEval(ec EvalConfig) Option {
	return func(c *config) {
		if ec.Pool != 0 {
			c.eval.pool = ec.Pool
		}
		if ec.NoFork {
			c.eval.noFork = true
		}
		if ec.Limits != (EvalLimits{}) {
			c.eval.limits = ec.Limits
		}
	}
}

// EvalOption configures one evaluation.
type EvalOption func(*evalOptions)

type evalOptions struct {
	profile        string
	stdout, stderr io.Writer
	capture        *Output
	limits         EvalLimits
}

// EvalProfile names the eval profile of the policy the evaluation runs under
// (declared by eval-<key>:NAME= lines); the default is the default profile
// (the eval-* lines without a suffix). There is never a fallback from one to the
// other.
func EvalProfile(name string) EvalOption { return func(o *evalOptions) { o.profile = name } }

// EvalOutput streams what the evaluation prints on sys.stdout and sys.stderr
// to stdout and stderr (nil discards), instead of capturing it (the default,
// see Output) or streaming it to the sandbox's CallConfig.Stdout writers.
func EvalOutput(stdout, stderr io.Writer) EvalOption {
	return func(o *evalOptions) {
		o.stdout, o.stderr = stdout, stderr
		if stdout == nil {
			o.stdout = io.Discard
		}
		if stderr == nil {
			o.stderr = io.Discard
		}
	}
}

// EvalCapture makes out receive what the evaluation printed on the streams
// that EvalOutput gives no writer, whether it succeeded or failed (what was
// printed before the failure); it overrides the sandbox's CallConfig.Stdout.
// Without it, captured output is kept for the error only (RemoteError.Output).
func EvalCapture(out *Output) EvalOption { return func(o *evalOptions) { o.capture = out } }

// EvalMemory sets the address-space limit of this evaluation's process.
func EvalMemory(bytes uint64) EvalOption { return func(o *evalOptions) { o.limits.Memory = bytes } }

// EvalCPU sets the processor-time limit of this evaluation's process.
func EvalCPU(d time.Duration) EvalOption { return func(o *evalOptions) { o.limits.CPU = d } }

// EvalMaxOutput sets the output limit of this evaluation.
func EvalMaxOutput(bytes int64) EvalOption { return func(o *evalOptions) { o.limits.Output = bytes } }

// ErrEvalLearning reports an evaluation asked of a sandbox that learns: the eval
// layer enforces, it does not learn.
var ErrEvalLearning = errors.New("pysandboxes: Eval does not run in learning mode (the eval-* rules are written by hand; see pysandboxes check)")

// EvalProcessError reports an evaluation whose process, or whose zygote, ended
// without an answer for another reason than a limit: a crash, a signal from
// outside the sandbox, a process that broke the protocol, a zygote that could
// not start or failed too often (Err wraps ErrRestartLimit then).
type EvalProcessError struct {
	// Signal that ended the process (0: none), and its exit status.
	Signal, Status int
	// Err says what happened.
	Err error
}

func (e *EvalProcessError) Error() string {
	s := "pysandboxes: the evaluation's process failed"
	if e.Signal != 0 {
		s += fmt.Sprintf(" (signal %d: %v)", e.Signal, syscall.Signal(e.Signal))
	} else if e.Status != 0 {
		s += fmt.Sprintf(" (exit status %d)", e.Status)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *EvalProcessError) Unwrap() error { return e.Err }

// Eval evaluates the Python expression src under the policy's eval profile (the
// default one, or the one EvalProfile names), with names as the variables it
// sees, and returns its value.
//
// The source is parsed by CPython, checked against the profile's sub-language
// (eval-syntax, eval-call, eval-attribute, eval-import, eval-magic, the static
// budgets), rewritten so that attribute reads, allocating operators, loops and
// calls charge the profile's budgets, and run in a process of its own, forked
// from a warm zygote that has already loaded the guard: nothing one evaluation
// does is visible to the next. The process runs under the sandbox's OS provider
// and the Python layer (whose rules it obeys like any sandboxed program: it is
// refused os.fork, unexposed files, sockets...), and under hard limits the host
// enforces: the wall clock (the profile's eval-timeout, and ctx) kills it even
// inside a blocking C call; RLIMIT_AS makes a huge allocation fail with
// MemoryError; RLIMIT_CPU; an output limit (see EvalLimits).
//
// The names are encoded with transport.Pickle (its Go types); the value comes
// back as a protocol 5 pickle decoded by transport.Unpickle in the policy's
// remote-result-mode, as for Call.
//
// What the code prints is captured by default, never written to the host's
// own standard output: EvalCapture receives it, a *RemoteError carries it
// (Output), and it is bounded by the output limit (EvalLimits.Output).
// EvalOutput, or CallConfig.Stdout, streams it instead.
//
// Errors (use errors.As and errors.Is):
//   - *evalguard.RejectedError: the source breaks the profile; every violation,
//     each with the rule line that would allow it.
//   - *evalguard.InterruptedError: a budget ended the evaluation; Budget is
//     "eval-timeout", "eval-max-iterations", "eval-max-call-depth",
//     "eval-max-alloc" (the guard's), or "memory", "cpu", "output" (the hard
//     limits).
//   - *RemoteError with errors.Is(err, ErrDenied): a refusal inside, of the
//     Python layer (a file, an import, os.fork...) or of the eval guard at run
//     time (an attribute through getattr, setattr...: a Denial of Kind "eval";
//     errors.As also finds the *evalguard.DeniedError, with its Fix).
//   - *RemoteError: the code raised an ordinary exception (class, message,
//     traceback of the evaluated source).
//   - *evalguard.UnknownProfileError: the policy declares no such profile (with
//     no eval-* rule at all, it says what to add).
//   - *evalguard.SourceError: a source holding a NUL byte or invalid UTF-8, or
//     longer than MaxEvalSource; a *transport.PickleError for names the encoder
//     cannot carry (or a name that is not an identifier).
//   - *ResultError: the value cannot be sent or decoded; *EvalProcessError: the
//     process or the zygote failed; ctx's error, wrapped, when ctx ended (the
//     process was killed); ErrSandboxClosed after Close; ErrEvalLearning.
func (s *Sandbox) Eval(ctx context.Context, src string, names map[string]any, opts ...EvalOption) (any, error) {
	return s.eval(ctx, false, src, names, opts)
}

// Exec runs the Python statements src like Eval, and returns the names the code
// bound (new names, or names bound to another object than before), except those
// whose value cannot travel: a function, a class or a module the code defined
// is left out.
func (s *Sandbox) Exec(ctx context.Context, src string, names map[string]any, opts ...EvalOption) (map[string]any, error) {
	v, err := s.eval(ctx, true, src, names, opts)
	if err != nil {
		return nil, err
	}
	d, ok := v.(transport.Dict)
	if !ok {
		return nil, &ResultError{Func: "exec", Err: fmt.Errorf("the names bound came back as %T, not a dict", v)}
	}
	m, ok := d.StringMap()
	if !ok {
		return nil, &ResultError{Func: "exec", Err: errors.New("the names bound came back with a key that is not a str")}
	}
	return m, nil
}

func (s *Sandbox) eval(ctx context.Context, exec bool, src string, names map[string]any, opts []EvalOption) (any, error) {
	var o evalOptions
	for _, f := range opts {
		f(&o)
	}
	pp := s.policy
	if s.cfg.python.learn != "" {
		return nil, ErrEvalLearning
	}
	prof, err := evalguard.FromPolicy(pp, o.profile)
	if err != nil {
		return nil, err
	}
	if err := evalguard.CheckSource(src); err != nil {
		return nil, err
	}
	if len(src) > MaxEvalSource {
		return nil, &evalguard.SourceError{Offset: MaxEvalSource, Reason: fmt.Sprintf("the source is %d bytes long, more than %d", len(src), MaxEvalSource)}
	}
	payload, err := encodeNames(names, pylayer.MaxCallFrame-len(src)-1024)
	if err != nil {
		return nil, err
	}
	req := &pylayer.EvalRequest{
		Exec: exec, Profile: o.profile, Filename: prof.SourceRef(), Source: src, Names: payload,
		Timeout: prof.Timeout, CPU: o.limits.CPU, Memory: o.limits.Memory, Output: o.limits.Output,
	}
	l := s.cfg.eval.limits
	if req.Memory == 0 {
		req.Memory = orDefault(l.Memory, DefaultEvalMemory)
	}
	if req.CPU <= 0 {
		req.CPU = l.CPU
	}
	if req.CPU <= 0 {
		req.CPU = prof.Timeout + time.Second
	}
	if req.Output <= 0 {
		req.Output = l.Output
	}
	if req.Output <= 0 {
		req.Output = s.cfg.limits.Output
	}
	if req.Output <= 0 {
		req.Output = DefaultEvalOutput
	}
	es, err := s.evals.get(func() *evals { return newEvals(s) })
	if err != nil {
		return nil, err
	}
	if !es.sup.Enter() {
		return nil, ErrSandboxClosed
	}
	defer es.sup.Leave()
	if err := es.sup.TakeSlot(ctx); err != nil {
		if err == ErrSandboxClosed {
			return nil, err
		}
		return nil, fmt.Errorf("pysandboxes: Eval: waiting for a free process: %w", err)
	}
	defer es.sup.FreeSlot()
	var capt capture
	w, _ := streams([2]io.Writer{o.stdout, o.stderr}, o.capture != nil, es.out.Work, &capt)
	out := pylayer.CallOutput{Stdout: w[0], Stderr: w[1], Limit: req.Output, LimitErr: ErrOutputLimit}
	r, zp, err := es.run(ctx, req, out)
	printed := capt.finish()
	if o.capture != nil {
		*o.capture = printed
	}
	if err != nil {
		return nil, err
	}
	v, err := s.evalReply(prof, req, r, zp)
	var re *RemoteError
	if errors.As(err, &re) {
		re.Output = printed
	}
	return v, err
}

func orDefault(v, def uint64) uint64 {
	if v == 0 {
		return def
	}
	return v
}

// encodeNames pickles the names as a dict (keys sorted); nil for none.
func encodeNames(names map[string]any, limit int) ([]byte, error) {
	if len(names) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		if !validIdentifier(k) {
			return nil, &transport.PickleError{Path: fmt.Sprintf("names[%q]", k), Type: "string", Err: transport.ErrUnsupported,
				Reason: fmt.Sprintf("the name %q is not a Python identifier", k)}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	d := make(transport.Dict, len(keys))
	for i, k := range keys {
		d[i] = transport.Pair{Key: k, Value: names[k]}
	}
	return transport.PickleWith(d, &transport.PickleOptions{MaxBytes: max(limit, 64), Root: "names"})
}

// evalReply turns the end of an evaluation into its value or error.
func (s *Sandbox) evalReply(prof *evalguard.Profile, req *pylayer.EvalRequest, r *pylayer.EvalReply, zp *zygoteProc) (any, error) {
	ref := prof.SourceRef()
	switch {
	case r.Result != nil:
		v, err, _ := s.decodeResult(ref, r.Result, false, s.cfg.call.maxResult+64)
		return v, err
	case r.Ended != nil:
		e := r.Ended
		switch e.Reason {
		case "timeout":
			return nil, &evalguard.InterruptedError{Budget: "eval-timeout", Limit: prof.Timeout.Seconds(),
				Message: fmt.Sprintf("evaluation interrupted: eval-timeout=%gs exhausted (its process was killed)", prof.Timeout.Seconds())}
		case "cpu":
			secs := int64((req.CPU + time.Second - 1) / time.Second)
			return nil, &evalguard.InterruptedError{Budget: "cpu", Limit: secs,
				Message: fmt.Sprintf("evaluation interrupted: its process used its %d s of processor time (RLIMIT_CPU) and was killed", secs)}
		case "output":
			return nil, outputInterrupted(req.Output)
		}
		detail := e.Detail
		if detail == "" {
			detail = "it ended without a result (" + e.Reason + ")"
		}
		return nil, &EvalProcessError{Signal: e.Signal, Status: e.Status, Err: errors.New(detail)}
	}
	x := r.Exception
	if x.Budget == "memory" {
		return nil, &evalguard.InterruptedError{Budget: "memory", Limit: x.Limit,
			Message: fmt.Sprintf("evaluation interrupted: memory=%d bytes exhausted (%s: %s)", x.Limit, x.Qualname, x.Message)}
	}
	switch x.Kind {
	case "result-too-large":
		return nil, &ResultError{Func: ref, Err: fmt.Errorf("%w: %s", ErrResultTooLarge, x.Message)}
	}
	if len(x.Guard) > 0 && string(x.Guard) != "null" {
		var args []any
		if json.Unmarshal(x.Guard, &args) != nil {
			args = nil
		}
		if gerr := evalguard.FromRemote(x.Module, x.Qualname, x.Message, args); gerr != nil {
			var de *evalguard.DeniedError
			if errors.As(gerr, &de) {
				return nil, &guardDenial{de: de, re: &RemoteError{Func: ref, Module: x.Module, Qualname: x.Qualname,
					Message: de.Message, Traceback: x.Traceback,
					Denials: []Denial{{Kind: "eval", Exception: "Denied", Message: de.Message, Target: de.Target}}}}
			}
			return nil, gerr
		}
	}
	e := &RemoteError{Func: ref, Module: x.Module, Qualname: x.Qualname, Message: x.Message, Traceback: x.Traceback, Base: x.Base}
	for _, d := range x.Denials {
		if zp != nil {
			if dd, ok := zp.z.Denial(d); ok {
				e.Denials = append(e.Denials, dd)
				continue
			}
		}
		exc, msg, _ := strings.Cut(d, ": ")
		e.Denials = append(e.Denials, Denial{Exception: exc, Message: msg})
	}
	return nil, e
}

// guardDenial is a refusal of the eval guard at run time: errors.As finds both
// the *RemoteError (with its Denial, so errors.Is(err, ErrDenied)) and the
// *evalguard.DeniedError (with the rule line that would allow it).
type guardDenial struct {
	re *RemoteError
	de *evalguard.DeniedError
}

func (e *guardDenial) Error() string   { return e.re.Error() }
func (e *guardDenial) Unwrap() []error { return []error{e.re, e.de} }

func outputInterrupted(limit int64) error {
	return &evalguard.InterruptedError{Budget: "output", Limit: limit,
		Message: fmt.Sprintf("evaluation interrupted: it printed more than %d bytes (its process was killed)", limit)}
}

// evalState is the Sandbox's eval layer: its zygote, made at the first Eval.
type evalState = lazyPool[evals]

// closeEvals is Close's part for the eval layer: no new evaluation; those in
// flight have the grace period, then their processes are killed; the zygote is
// stopped and reaped.
func (s *Sandbox) closeEvals() error {
	if es := s.evals.shut(); es != nil {
		es.close()
	}
	return nil
}

// evals runs the zygote of one Sandbox.
type evals struct {
	s   *Sandbox
	sup *pypool.Pool
	out *pypool.Output

	mu       sync.Mutex
	cur      *zygoteProc
	starting chan struct{} // closed when the start in progress ends
	fallback string        // why evaluations start a fresh process each ("" while the zygote is used)
}

func newEvals(s *Sandbox) *evals {
	es := &evals{s: s, sup: newSupervisor(s, max(s.cfg.eval.pool, 1)), out: newPoolOutput(&s.cfg.call)}
	if s.cfg.eval.noFork {
		es.fallback = "WithEval(EvalConfig{NoFork: true})"
	}
	return es
}

// zygoteProc is one zygote process (or, in single mode, one evaluation's
// process).
type zygoteProc struct {
	*pypool.Proc
	z    *pylayer.Zygote
	info pylayer.ZygoteInfo
}

// run serves one evaluation: on the zygote (started when none runs), or on a
// fresh process of its own in fallback mode.
func (es *evals) run(ctx context.Context, req *pylayer.EvalRequest, out pylayer.CallOutput) (*pylayer.EvalReply, *zygoteProc, error) {
	zp, err := es.zygote(ctx)
	if err != nil {
		return nil, nil, err
	}
	single := zp.info.Single
	if single {
		defer zp.Stop()
	}
	// The host's own bound, past which the zygote (or the single process) is
	// ended: the timeout, plus a grace for the zygote to report (the zygote
	// counts the timeout from the moment a process takes the evaluation).
	bound := req.Timeout + evalGrace
	if single {
		bound = req.Timeout
	}
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	r, err := zp.z.Eval(rctx, req, out)
	switch {
	case err == nil:
		return r, zp, nil
	case errors.Is(err, ErrOutputLimit):
		if single {
			zp.Kill(true, ErrOutputLimit)
		}
		return nil, zp, outputInterrupted(req.Output)
	case ctx.Err() != nil:
		if single || errors.Is(err, pylayer.ErrCancelUnconfirmed) {
			zp.Kill(true, ctx.Err())
		}
		return nil, zp, fmt.Errorf("pysandboxes: Eval: the evaluation's process was killed: %w", ctx.Err())
	case rctx.Err() != nil:
		// Single mode: the timeout; else the zygote did not report the end of
		// the evaluation in time: it is ended (and replaced).
		zp.Kill(true, context.DeadlineExceeded)
		return nil, zp, &evalguard.InterruptedError{Budget: "eval-timeout", Limit: req.Timeout.Seconds(),
			Message: fmt.Sprintf("evaluation interrupted: eval-timeout=%gs exhausted (its process was killed)", req.Timeout.Seconds())}
	}
	// The zygote ended (or its channel broke) during the evaluation: the
	// evaluation is not sent again (it may have run in part).
	zp.WaitExit()
	return nil, zp, evalExitError(zp.Proc, err)
}

// evalExitError describes the end of a zygote or single process.
func evalExitError(x *pypool.Proc, reason error) error {
	e := &EvalProcessError{Err: reason}
	if st, ok := x.Status(); ok {
		if st.Signaled() {
			e.Signal = int(st.Signal())
		} else if st.Exited() {
			e.Status = st.ExitStatus()
		}
	}
	if e.Signal == int(syscall.SIGXCPU) {
		return &evalguard.InterruptedError{Budget: "cpu", Message: "evaluation interrupted: its process used its processor time (RLIMIT_CPU) and was killed"}
	}
	return e
}

// zygote returns the running zygote, starting one (after the restart policy's
// backoff) when none runs; in fallback mode, a new single-evaluation process.
func (es *evals) zygote(ctx context.Context) (*zygoteProc, error) {
	for {
		if es.sup.IsClosed() {
			return nil, ErrSandboxClosed
		}
		es.mu.Lock()
		if es.fallback == "" && es.cur != nil {
			zp := es.cur
			if zp.Usable() {
				es.mu.Unlock()
				return zp, nil
			}
			// Gone: its end is counted (restart policy) once its process is
			// reaped.
			es.cur = nil
			es.mu.Unlock()
			zp.WaitExit()
			continue
		}
		if ch := es.starting; ch != nil {
			es.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("pysandboxes: Eval: waiting for the zygote to start: %w", ctx.Err())
			case <-es.sup.Closing():
				return nil, ErrSandboxClosed
			}
		}
		single := es.fallback != ""
		wait, err := es.sup.Budget()
		if err != nil {
			es.mu.Unlock()
			return nil, &EvalProcessError{Err: err}
		}
		ch := make(chan struct{})
		if !single {
			es.starting = ch
		}
		es.mu.Unlock()
		zp, err := es.startAfter(ctx, wait, single)
		es.mu.Lock()
		if !single {
			es.starting = nil
			close(ch)
		}
		if err != nil {
			es.mu.Unlock()
			return nil, err
		}
		if !single && !zp.info.Fork {
			// Forking does not work in this sandbox: fresh processes from now on.
			es.fallback = zp.info.Reason
			es.mu.Unlock()
			es.s.cfg.logger.Warn("eval: forking does not work in this sandbox; each evaluation starts a fresh interpreter",
				"provider", es.s.provider.Name(), "reason", zp.info.Reason)
			zp.Stop()
			continue
		}
		if !single {
			es.cur = zp
		}
		es.mu.Unlock()
		return zp, nil
	}
}

func (es *evals) startAfter(ctx context.Context, wait time.Duration, single bool) (*zygoteProc, error) {
	if err := es.sup.Backoff(ctx, wait); err != nil {
		if err == ErrSandboxClosed {
			return nil, err
		}
		return nil, fmt.Errorf("pysandboxes: Eval: waiting for the zygote to restart: %w", err)
	}
	return es.start(ctx, single)
}

// start starts a zygote (or a single-evaluation process) and waits until it is
// ready.
func (es *evals) start(ctx context.Context, single bool) (*zygoteProc, error) {
	run := &zygoteRun{es: es, single: single}
	cmd := es.s.pythonCmd(es.sup.Context(), run, es.out)
	var info pylayer.ZygoteInfo
	x, err := es.sup.Start(ctx, pypool.Spawn{
		Process: poolCmd{cmd},
		Channel: func() pypool.Channel { return run.z },
		Ready: func(ctx context.Context) error {
			var err error
			info, err = run.z.Ready(ctx)
			return err
		},
		Counts: func() bool { return !single },
	})
	if err == nil {
		return &zygoteProc{Proc: x, z: run.z, info: info}, nil
	}
	if e, ok := startFailure(err, "the eval zygote", "pysandboxes: Eval: starting the zygote", func(e error) error { return &EvalProcessError{Err: e} }); ok {
		return nil, e
	}
	x.WaitExit()
	return nil, evalExitError(x, err)
}

// close stops the eval layer (see closeEvals).
func (es *evals) close() { es.sup.Close(nil) }

// zygoteRun is the Python side of a zygote's Cmd (its cmdExt).
type zygoteRun struct {
	pyProcess
	es     *evals
	single bool
	z      *pylayer.Zygote
}

func (r *zygoteRun) prepare(c *Cmd) error {
	s := c.sb
	in, guard, err := r.interpreter(c)
	if err != nil {
		return err
	}
	pp := s.policy
	z, err := pylayer.NewZygote(c.ctx, pylayer.ConfigInput{
		Policy: pp, Interp: in, Mode: pylayer.ModeEnforce, Provider: s.provider.Name(), RulesFile: pp.Path,
	}, pylayer.ZygoteOptions{
		Guard: guard, Single: r.single, Pool: r.es.sup.Slots(), MaxResult: s.cfg.call.maxResult,
		Entry: evalguard.Module, Preload: evalPreload(pp), Stdout: r.es.out.Out, Stderr: r.es.out.Err,
	})
	if err != nil {
		return err
	}
	r.z = z
	r.attach(c, in, z.Session())
	// The zygote's host closes its channel whole (CloseWrite, then nothing
	// more is read): a provider may carry it on a faster path.
	c.channel = 2 + len(c.ExtraFiles)
	return nil
}

// evalPreload returns the modules the zygote imports before its first fork:
// those an eval profile lets the code import (eval-import, exact names), when
// python-import= lets them be imported too (an import done by the zygote is not
// judged again in the processes it forks).
func evalPreload(pp *policy.Policy) []string {
	var out []string
	ev := pp.Eval()
	for _, n := range ev.Names() {
		ep, _ := ev.Profile(n)
		allow, _ := ep.Import.Expanded()
		for _, m := range allow {
			if strings.ContainsAny(m, "*-") || slices.Contains(out, m) || !ep.Import.Allows(m) {
				continue
			}
			if ok, _ := pp.Imports().Allowed(m); ok {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}
