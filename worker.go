package pysandboxes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/pypool"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/pylayer"
)

// callConfig holds the options of partial mode (Sandbox.Call).
type callConfig struct {
	workers int
	init    string
	eager   bool
	// stdout, stderr: where calls and evaluations stream by default
	// (CallConfig.Stdout; nil: captured). procOut, procErr: where the worker and
	// zygote processes' own output goes.
	stdout, stderr   io.Writer
	procOut, procErr io.Writer
	timeout          time.Duration
	maxResult        int
	dir              string
	path             []string
	grace            time.Duration
	restart          RestartPolicy
	startTimeout     time.Duration
}

// RestartPolicy bounds the restarts of failing workers (see CallConfig.Restart).
// A failure is a worker that ended on its own (a crash, a signal from outside, a
// resource limit), broke the channel's protocol, sent a malformed result, could
// not start, or whose init function raised. A worker the host killed on purpose
// (timeout, cancellation, Close) is replaced without counting.
type RestartPolicy struct {
	// Max is the number of restarts allowed within Window: past it, calls that
	// need a new worker fail at once with ErrRestartLimit until the oldest
	// failure leaves the window.
	Max    int
	Window time.Duration
	// Backoff is the delay before the restart after one failure in the window;
	// each further failure multiplies it by Factor, up to MaxBackoff.
	Backoff    time.Duration
	Factor     float64
	MaxBackoff time.Duration
}

// DefaultRestartPolicy is upstream's: 5 restarts per 3 minutes, after 1 s,
// 1.5 s, 2.25 s... at most 5 s.
var DefaultRestartPolicy = RestartPolicy{Max: 5, Window: 3 * time.Minute, Backoff: time.Second, Factor: 1.5, MaxBackoff: 5 * time.Second}

// Defaults of partial mode.
const (
	DefaultCloseGrace   = 5 * time.Second
	DefaultStartTimeout = 30 * time.Second
	DefaultMaxResult    = pylayer.DefaultMaxResult
	// DefaultCallOutput bounds what a call whose output is captured may print
	// (both streams together), when Limits.Output does not.
	DefaultCallOutput = 1 << 20
	// stopGrace is how long a worker whose channel was closed has to exit.
	stopGrace = 2 * time.Second
)

// CallConfig configures the Python processes behind Call (its workers) and,
// for what they share, behind Eval (its zygote): WithCall sets it. A zero
// field keeps the default.
type CallConfig struct {
	// Workers is how many worker processes serve Call at once (default 1:
	// calls are serialized). Each worker runs one call at a time; calls beyond
	// wait for a free worker.
	Workers int
	// Init names a function ("module:function", sync or async) that every
	// worker runs inside, under the guard, after each start and before its
	// first call: logging set-up, connection pools... A raising init fails the
	// start (a *WorkerError wrapping the *RemoteError).
	Init string
	// Eager makes New start the workers (and run their init function), instead
	// of the first Call; New fails when they cannot start.
	Eager bool
	// Timeout is the default timeout of a call (CallOptions.Timeout).
	Timeout time.Duration
	// MaxResult bounds the pickle of one call's result (default
	// DefaultMaxResult, 16 MiB): the worker refuses to send more (a
	// *ResultError wrapping ErrResultTooLarge), and the host never reads more.
	MaxResult int
	// Dir is the working directory of the workers and of the eval zygote
	// (default the host's), the first directory searched for the called
	// modules. The policy must expose it (expose-ro=) for the OS provider and
	// the Python layer to let it be read.
	Dir string
	// PythonPath are directories put first on the workers' sys.path (the
	// policy must expose them).
	PythonPath []string
	// CloseGrace is how long Close waits for the calls and evaluations in
	// flight before it kills their processes (default DefaultCloseGrace, 5 s).
	CloseGrace time.Duration
	// Restart bounds the restarts of failing workers and zygotes (the zero
	// value is DefaultRestartPolicy).
	Restart RestartPolicy
	// StartTimeout bounds the start of a worker, its init function included,
	// or of the eval zygote (default DefaultStartTimeout, 30 s).
	StartTimeout time.Duration
	// Stdout and Stderr, when either is set, make calls and evaluations stream
	// what they print there, as it is printed, instead of capturing it (the
	// default, see Output); a nil one of the two discards. CallOptions.Stdout
	// and Stderr, CallOptions.Capture, EvalOutput and EvalCapture override it
	// for one call or evaluation. The worker and zygote processes' own output
	// (what they print outside a call, and what reaches descriptors 1 and 2
	// directly: C code, child processes) goes there too, unless ProcessStdout
	// or ProcessStderr is set.
	//
	// Stdout: os.Stdout prints on the host's own standard output: never do that
	// in a host whose standard output is a protocol.
	Stdout, Stderr io.Writer
	// ProcessStdout and ProcessStderr, when either is set, receive the worker
	// and zygote processes' own output: what they print outside a call or an
	// evaluation (the init function's prints included), and what is written to
	// their descriptors 1 and 2 directly (by C code, or by child processes),
	// which is never part of a call's output; a nil one of the two discards.
	// The default is the host's standard error, for both: never its standard
	// output.
	ProcessStdout, ProcessStderr io.Writer
}

// WithCall sets the configuration of the Python processes behind Call and
// Eval: the fields of cc that are not zero (several WithCall add up).
func WithCall(cc CallConfig) Option {
	return func(c *config) {
		m := &c.call
		if cc.Workers != 0 {
			m.workers = cc.Workers
		}
		if cc.Init != "" {
			m.init = cc.Init
		}
		if cc.Eager {
			m.eager = true
		}
		if cc.Timeout != 0 {
			m.timeout = cc.Timeout
		}
		if cc.MaxResult != 0 {
			m.maxResult = cc.MaxResult
		}
		if cc.Dir != "" {
			m.dir = cc.Dir
		}
		m.path = append(m.path, cc.PythonPath...)
		if cc.CloseGrace != 0 {
			m.grace = cc.CloseGrace
		}
		if cc.Restart != (RestartPolicy{}) {
			m.restart = cc.Restart
		}
		if cc.StartTimeout != 0 {
			m.startTimeout = cc.StartTimeout
		}
		if cc.Stdout != nil || cc.Stderr != nil {
			m.stdout, m.stderr = orDiscard(cc.Stdout), orDiscard(cc.Stderr)
			m.procOut, m.procErr = m.stdout, m.stderr
		}
		if cc.ProcessStdout != nil || cc.ProcessStderr != nil {
			m.procOut, m.procErr = orDiscard(cc.ProcessStdout), orDiscard(cc.ProcessStderr)
		}
	}
}

// orDiscard is w, or io.Discard when w is nil.
func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func (c *callConfig) defaults() {
	if c.workers <= 0 {
		c.workers = 1
	}
	if c.procOut == nil {
		c.procOut = os.Stderr
	}
	if c.procErr == nil {
		c.procErr = os.Stderr
	}
	if c.maxResult <= 0 {
		c.maxResult = DefaultMaxResult
	}
	if c.grace <= 0 {
		c.grace = DefaultCloseGrace
	}
	if c.startTimeout <= 0 {
		c.startTimeout = DefaultStartTimeout
	}
	r := &c.restart
	if r.Max == 0 && r.Window == 0 && r.Backoff == 0 {
		*r = DefaultRestartPolicy
	}
	if r.Factor < 1 {
		r.Factor = 1
	}
	if r.MaxBackoff < r.Backoff {
		r.MaxBackoff = r.Backoff
	}
}

// callState is the Sandbox's partial mode: its pool, made at the first call.
type callState struct {
	lazyPool[workerPool]
	learned *policy.LearnResult // under mu
}

func (cs *callState) pool(s *Sandbox) (*workerPool, error) {
	return cs.get(func() *workerPool { return newWorkerPool(s) })
}

// lazyPool is a pool made at its first use, and closed once.
type lazyPool[T any] struct {
	mu     sync.Mutex
	p      *T
	closed bool
}

func (l *lazyPool[T]) get(newPool func() *T) (*T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrSandboxClosed
	}
	if l.p == nil {
		l.p = newPool()
	}
	return l.p, nil
}

// shut marks the pool closed and returns it, to be closed (nil when it was
// never made, or is closed already).
func (l *lazyPool[T]) shut() *T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.p
}

// StartWorkers starts the sandbox's workers now (running their init function)
// rather than at the first Call. Workers already running are kept.
func (s *Sandbox) StartWorkers(ctx context.Context) error {
	p, err := s.calls.pool(s)
	if err != nil {
		return err
	}
	if !p.enter() {
		return ErrSandboxClosed
	}
	defer p.sup.Leave()
	var wps []*workerProc
	var errs []error
	for range p.cfg.workers {
		wp, err := p.acquire(ctx, "")
		if err != nil {
			errs = append(errs, err)
			break
		}
		wps = append(wps, wp)
	}
	for _, wp := range wps {
		p.release(wp)
	}
	return errors.Join(errs...)
}

// Learned returns what learning wrote from the calls when the sandbox was
// closed (nil before Close, and when the sandbox does not learn or made no
// call).
func (s *Sandbox) Learned() *policy.LearnResult {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return s.calls.learned
}

// closeCalls is Close's part for partial mode: no new call; the calls in flight
// get the grace period, then their workers are killed; every worker is stopped
// and reaped; learning writes what the calls did.
func (s *Sandbox) closeCalls() error {
	p := s.calls.shut()
	if p == nil {
		return nil
	}
	lr, err := p.close()
	s.calls.mu.Lock()
	s.calls.learned = lr
	s.calls.mu.Unlock()
	return err
}

// workerPool runs the workers of one Sandbox.
type workerPool struct {
	s   *Sandbox
	cfg *callConfig
	sup *pypool.Pool
	out *pypool.Output

	mu   sync.Mutex
	idle []*workerProc

	// Learning.
	obs       []policy.Observations
	results   bool
	resultObj bool
	learnDir  string
	interp    *pylayer.Interpreter
	since     time.Time // when the first worker was prepared
}

func newWorkerPool(s *Sandbox) *workerPool {
	cfg := &s.cfg.call
	return &workerPool{s: s, cfg: cfg, sup: newSupervisor(s, cfg.workers), out: newPoolOutput(cfg)}
}

// newSupervisor returns the supervision of a pool of the sandbox's Python
// processes (workers or zygote) with n slots.
func newSupervisor(s *Sandbox, n int) *pypool.Pool {
	cfg := &s.cfg.call
	r := cfg.restart
	return pypool.New(pypool.Config{
		Slots:        n,
		Restart:      pypool.Restart{Max: r.Max, Window: r.Window, Backoff: r.Backoff, Factor: r.Factor, MaxBackoff: r.MaxBackoff},
		StartTimeout: cfg.startTimeout,
		Grace:        cfg.grace,
		StopGrace:    stopGrace,
		KillWait:     killGrace + time.Second,
		Closed:       ErrSandboxClosed,
		RestartLimit: ErrRestartLimit,
	})
}

func newPoolOutput(cfg *callConfig) *pypool.Output {
	return pypool.NewOutput(cfg.procOut, cfg.procErr, cfg.stdout, cfg.stderr)
}

// pythonCmd returns the Cmd of one of the sandbox's Python processes (its
// Python side set by ext), writing its own output to out.
func (s *Sandbox) pythonCmd(ctx context.Context, ext cmdExt, out *pypool.Output) *Cmd {
	cmd := &Cmd{sb: s, ctx: ctx, Path: "python", Args: []string{"python"}, Dir: s.cfg.call.dir, ext: ext}
	cmd.Stdout, cmd.Stderr = out.ProcessStdio()
	return cmd
}

// poolCmd is a Cmd as the pool drives it.
type poolCmd struct{ *Cmd }

func (c poolCmd) Terminate(reason error) { c.terminate(reason) }

// enter counts a call in flight (false once closed).
func (p *workerPool) enter() bool { return p.sup.Enter() }

// workerProc is one worker process.
type workerProc struct {
	*pypool.Proc
	conn *pylayer.Worker
}

// acquire returns a worker for a call, starting one when none is idle (after
// the restart policy's backoff), within the pool's size.
func (p *workerPool) acquire(ctx context.Context, fn string) (*workerProc, error) {
	if err := p.sup.TakeSlot(ctx); err != nil {
		if err == ErrSandboxClosed {
			return nil, err
		}
		return nil, fmt.Errorf("pysandboxes: call %s: waiting for a worker: %w", fn, err)
	}
	for {
		if p.sup.IsClosed() {
			p.sup.FreeSlot()
			return nil, ErrSandboxClosed
		}
		if wp := p.takeIdle(); wp != nil {
			return wp, nil
		}
		wait, err := p.sup.Budget()
		if err != nil {
			p.sup.FreeSlot()
			return nil, &WorkerError{Func: fn, Err: err}
		}
		if wait > 0 {
			if err := p.sup.Backoff(ctx, wait); err != nil {
				p.sup.FreeSlot()
				if err == ErrSandboxClosed {
					return nil, err
				}
				return nil, fmt.Errorf("pysandboxes: call %s: waiting for a worker to restart: %w", fn, err)
			}
			continue // an idle worker may have come back, or the budget changed
		}
		wp, err := p.start(ctx)
		if err != nil {
			p.sup.FreeSlot()
			var we *WorkerError
			if errors.As(err, &we) {
				we.Func = fn
				return nil, we
			}
			return nil, err
		}
		return wp, nil
	}
}

// takeIdle returns an idle worker that is still usable (nil: none).
func (p *workerPool) takeIdle() *workerProc {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		wp := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if wp.Usable() {
			return wp
		}
	}
	return nil
}

// release gives a worker back after a call (nil: the slot only).
func (p *workerPool) release(wp *workerProc) {
	p.mu.Lock()
	switch {
	case wp == nil:
	case !wp.Usable():
		// Replaced at the next acquire.
	case p.sup.IsClosed():
		wp.Stop()
	default:
		p.idle = append(p.idle, wp)
	}
	p.mu.Unlock()
	p.sup.FreeSlot()
}

// start starts one worker and waits until it is ready (its init function run).
func (p *workerPool) start(ctx context.Context) (*workerProc, error) {
	run := &workerRun{p: p}
	cmd := p.s.pythonCmd(p.sup.Context(), run, p.out)
	x, err := p.sup.Start(ctx, pypool.Spawn{
		Process: poolCmd{cmd},
		Channel: func() pypool.Channel { return run.conn },
		Ready:   func(ctx context.Context) error { return run.conn.Ready(ctx) },
		Counts:  func() bool { return !errors.Is(cmd.killReason(), ErrOutputLimit) },
	})
	if err == nil {
		return &workerProc{Proc: x, conn: run.conn}, nil
	}
	if e, ok := startFailure(err, "the worker", "pysandboxes: starting a worker", func(e error) error { return &WorkerError{Err: e} }); ok {
		return nil, e
	}
	var ie *pylayer.InitError
	if errors.As(err, &ie) {
		re := remoteError(p.cfg.init, ie.Exception, run.conn)
		return nil, &WorkerError{Err: fmt.Errorf("the init function %s raised: %w", p.cfg.init, re)}
	}
	<-x.Exited()
	return nil, &WorkerError{Err: exitError(x, err)}
}

// startFailure describes a start error of the pool (what names the process;
// canceled prefixes the error of a caller that gave up; wrap makes the
// process error of the mode). ok is false for the process's own readiness
// error, which the caller describes.
func startFailure(err error, what, canceled string, wrap func(error) error) (_ error, ok bool) {
	var (
		se *pypool.SpawnError
		ce *pypool.CanceledError
		ne *pypool.NotReadyError
	)
	switch {
	case err == ErrSandboxClosed:
		return err, true
	case errors.As(err, &se):
		return wrap(fmt.Errorf("starting %s: %w", what, se.Err)), true
	case errors.As(err, &ce):
		return fmt.Errorf("%s: %w", canceled, ce.Err), true
	case errors.As(err, &ne):
		return wrap(fmt.Errorf("%s was not ready after %v: it was killed", what, ne.After)), true
	}
	return nil, false
}

// exitError describes a worker's end (with its exit status when it is known).
func exitError(x *pypool.Proc, reason error) error {
	if st, ok := x.Status(); ok {
		switch {
		case st.Signaled():
			return fmt.Errorf("%w (signal: %v)", reason, st.Signal())
		case st.Exited():
			return fmt.Errorf("%w (exit status %d)", reason, st.ExitStatus())
		}
	}
	return reason
}

// run makes one call on wp. retry reports a call that never reached the worker.
func (p *workerPool) run(ctx context.Context, wp *workerProc, fn string, payload []byte, o CallOptions) (v any, err error, retry bool) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = p.cfg.timeout
	}
	cctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var capt capture
	w, captured := streams([2]io.Writer{o.Stdout, o.Stderr}, o.Capture != nil, p.out.Work, &capt)
	out := pylayer.CallOutput{Stdout: w[0], Stderr: w[1], Limit: p.s.cfg.limits.Output, LimitErr: ErrOutputLimit}
	if captured && out.Limit <= 0 {
		out.Limit = DefaultCallOutput
	}
	reply, err := wp.conn.Call(cctx, fn, payload, out)
	printed := capt.finish()
	if o.Capture != nil {
		*o.Capture = printed
	}
	if err != nil {
		switch {
		case cctx.Err() != nil:
			wp.Kill(true, cctx.Err())
			if ctx.Err() == nil {
				return nil, fmt.Errorf("pysandboxes: call %s timed out after %v: its worker was killed: %w", fn, timeout, context.DeadlineExceeded), false
			}
			return nil, fmt.Errorf("pysandboxes: call %s: its worker was killed: %w", fn, ctx.Err()), false
		case errors.Is(err, ErrOutputLimit):
			wp.Kill(true, err)
			how := "Limits.Output"
			if captured && p.s.cfg.limits.Output <= 0 {
				how = "DefaultCallOutput, for captured output (raise Limits.Output, or stream it with CallOptions.Stdout and Stderr or CallConfig.Stdout)"
			}
			return nil, fmt.Errorf("pysandboxes: call %s: output limit of %d bytes exceeded (%s): its worker was killed: %w", fn, out.Limit, how, ErrOutputLimit), false
		case errors.Is(err, pylayer.ErrNotDelivered):
			wp.Kill(false, err)
			return nil, &WorkerError{Func: fn, Err: err}, true
		}
		if !errors.Is(err, pylayer.ErrWorkerExited) {
			wp.Kill(false, err)
		}
		// Wait (briefly) for the process to be reaped, to report its status.
		wp.WaitExit()
		if p.sup.IsClosed() && wp.HostKilled() {
			return nil, fmt.Errorf("pysandboxes: call %s: %w: its worker was killed", fn, ErrSandboxClosed), false
		}
		return nil, &WorkerError{Func: fn, Err: exitError(wp.Proc, err)}, false
	}
	if x := reply.Exception; x != nil {
		switch x.Kind {
		case "result-too-large":
			return nil, &ResultError{Func: fn, Err: fmt.Errorf("%w: %s", ErrResultTooLarge, x.Message)}, false
		}
		re := remoteError(fn, x, wp.conn)
		re.Output = printed
		return nil, re, false
	}
	learning := p.s.cfg.python.learn != ""
	if learning {
		obj := needsObjects(reply.Result)
		p.mu.Lock()
		p.results = true
		p.resultObj = p.resultObj || obj
		p.mu.Unlock()
	}
	v, err, bad := p.s.decodeResult(fn, reply.Result, learning, p.cfg.maxResult+64)
	if bad {
		wp.Kill(false, err)
		p.sup.Fail(wp.Proc)
	}
	return v, err, false
}

// close stops the pool (see closeCalls) and learns.
func (p *workerPool) close() (*policy.LearnResult, error) {
	p.sup.Close(func() {
		p.mu.Lock()
		idle := p.idle
		p.idle = nil
		p.mu.Unlock()
		for _, wp := range idle {
			wp.Stop()
		}
	})
	return p.learn()
}

// learn merges what the workers observed (learning mode) into the rule file.
func (p *workerPool) learn() (*policy.LearnResult, error) {
	s := p.s
	file := s.cfg.python.learn
	p.mu.Lock()
	obs, results, resultObj, dir, interp, since := p.obs, p.results, p.resultObj, p.learnDir, p.interp, p.since
	p.mu.Unlock()
	if file == "" || (len(obs) == 0 && !results) {
		return nil, nil
	}
	merged := mergeObservations(obs)
	if results {
		merged.Results = &policy.ResultObservation{Objects: resultObj}
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	var skip []string
	if interp != nil {
		skip = append(skip, interp.Info.Stdlib...)
		skip = append(skip, interp.Info.Site...)
		skip = append(skip, filepath.Dir(interp.Path))
	}
	lr, err := policy.Learn(file, merged, policy.LearnOptions{Dir: dir, Skip: skip, Since: since, Logger: s.cfg.logger})
	if err != nil {
		return nil, err
	}
	if f := s.cfg.python.learnLog; f != nil {
		f(lr)
	}
	return lr, nil
}

// mergeObservations joins the observations of several workers, without
// duplicates.
func mergeObservations(all []policy.Observations) policy.Observations {
	var out policy.Observations
	env, imps, api, eval := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	files := map[policy.FileAccess]bool{}
	nets := map[policy.NetAccess]bool{}
	dns := map[string]int{}
	for _, o := range all {
		out.Env = appendNew(out.Env, env, o.Env)
		out.Files = appendNew(out.Files, files, o.Files)
		out.Net = appendNew(out.Net, nets, o.Net)
		for _, d := range o.DNS {
			i, ok := dns[d.Name]
			if !ok {
				dns[d.Name] = len(out.DNS)
				out.DNS = append(out.DNS, policy.DNSAnswer{Name: d.Name, Addrs: slices.Clone(d.Addrs)})
				continue
			}
			for _, a := range d.Addrs {
				if !slices.Contains(out.DNS[i].Addrs, a) {
					out.DNS[i].Addrs = append(out.DNS[i].Addrs, a)
				}
			}
		}
		out.Imports = appendNew(out.Imports, imps, o.Imports)
		out.API = appendNew(out.API, api, o.API)
		out.Eval = appendNew(out.Eval, eval, o.Eval)
	}
	return out
}

// appendNew appends to out the elements of in not seen yet.
func appendNew[T comparable](out []T, seen map[T]bool, in []T) []T {
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// pyProcess is what the Python sides of a worker's and a zygote's Cmd share:
// the interpreter, the guard, and the channel's session, passed to the child
// as an extra descriptor.
type pyProcess struct {
	session *pylayer.Session
	// finished receives the session's end (nil: nothing to collect).
	finished func(*pylayer.Result)
}

// interpreter sets c to run the sandbox's interpreter, and says whether the
// Python layer guards it.
func (r *pyProcess) interpreter(c *Cmd) (in *pylayer.Interpreter, guard bool, err error) {
	s := c.sb
	in, err = s.Interpreter(c.ctx)
	if err != nil {
		return nil, false, err
	}
	c.Path = in.Path
	guard = !s.cfg.python.layerOff && s.provider.Name() != "none"
	if on, _ := s.policy.PySandbox(); !on {
		guard = false
	}
	return in, guard, nil
}

// attach passes the session's channel to the child and sets its command.
func (r *pyProcess) attach(c *Cmd, in *pylayer.Interpreter, session *pylayer.Session) {
	r.session = session
	fd := 3 + len(c.ExtraFiles)
	c.ExtraFiles = append(c.ExtraFiles, session.ChildFile())
	c.Args = pylayer.Command(in, nil, fd)
}

func (r *pyProcess) started(c *Cmd) {
	r.session.Started(func(err error) { c.terminate(err) })
}

func (r *pyProcess) abort() { r.session.Abort() }

func (r *pyProcess) finish(c *Cmd) error {
	res := r.session.Finish(2 * time.Second)
	if res.DroppedDenials > 0 {
		c.sb.cfg.logger.Warn("Python layer: more refusals than kept", "dropped", res.DroppedDenials)
	}
	if r.finished != nil {
		r.finished(res)
	}
	return nil
}

// workerRun is the Python side of a worker's Cmd (its cmdExt).
type workerRun struct {
	pyProcess
	p    *workerPool
	conn *pylayer.Worker
}

func (r *workerRun) prepare(c *Cmd) error {
	s := c.sb
	in, guard, err := r.interpreter(c)
	if err != nil {
		return err
	}
	pp := s.policy
	mode := pylayer.ModeEnforce
	learning := s.cfg.python.learn != ""
	if learning {
		mode = pylayer.ModeLearn
	}
	conn, err := pylayer.NewWorker(c.ctx, pylayer.ConfigInput{
		Policy: pp, Interp: in, Mode: mode, Provider: s.provider.Name(), RulesFile: pp.Path, LearnFile: s.cfg.python.learn,
	}, pylayer.WorkerOptions{
		Init: s.cfg.call.init, Guard: guard, MaxResult: s.cfg.call.maxResult, Path: s.cfg.call.path,
		Stdout: r.p.out.Out, Stderr: r.p.out.Err,
	})
	if err != nil {
		return err
	}
	r.conn = conn
	r.attach(c, in, conn.Session())
	if learning {
		c.env = learningEnv(s)
		r.finished = func(res *pylayer.Result) {
			if res.Armed {
				r.p.mu.Lock()
				r.p.obs = append(r.p.obs, res.Observations)
				r.p.mu.Unlock()
			}
		}
	}
	r.p.mu.Lock()
	r.p.interp = in
	if r.p.learnDir == "" {
		r.p.learnDir = c.Dir
	}
	if r.p.since.IsZero() {
		r.p.since = time.Now()
	}
	r.p.mu.Unlock()
	return nil
}

// killReason is why the sandbox ended the program (nil when it ended on its
// own).
func (c *Cmd) killReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}
