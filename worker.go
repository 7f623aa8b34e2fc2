package pysandboxes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

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
	mu      sync.Mutex
	p       *workerPool
	closed  bool
	learned *policy.LearnResult
}

func (cs *callState) pool(s *Sandbox) (*workerPool, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, ErrSandboxClosed
	}
	if cs.p == nil {
		cs.p = newWorkerPool(s)
	}
	return cs.p, nil
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
	defer p.inflight.Done()
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
	s.calls.mu.Lock()
	if s.calls.closed {
		s.calls.mu.Unlock()
		return nil
	}
	s.calls.closed = true
	p := s.calls.p
	s.calls.mu.Unlock()
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
	s     *Sandbox
	cfg   *callConfig
	slots chan struct{}
	// ctx is the workers' context: it ends at Close, after the grace period.
	ctx    context.Context
	cancel context.CancelFunc
	// out, errOut: the processes' own output; callOut: the calls' default
	// writers (nil: captured).
	out, errOut *lockedWriter
	callOut     [2]io.Writer

	mu       sync.Mutex
	closed   bool
	closing  chan struct{}
	idle     []*workerProc
	all      map[*workerProc]bool
	failures []time.Time
	inflight sync.WaitGroup
	procs    sync.WaitGroup

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
	ctx, cancel := context.WithCancel(context.Background())
	p := &workerPool{
		s: s, cfg: cfg, slots: make(chan struct{}, cfg.workers), ctx: ctx, cancel: cancel,
		closing: make(chan struct{}), all: map[*workerProc]bool{},
	}
	mu := new(sync.Mutex) // one lock: the writers may be the same
	p.out, p.errOut = &lockedWriter{mu: mu, w: cfg.procOut}, &lockedWriter{mu: mu, w: cfg.procErr}
	p.callOut = defaultStreams(mu, cfg)
	return p
}

// enter counts a call in flight (false once closed).
func (p *workerPool) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.inflight.Add(1)
	return true
}

// workerProc is one worker process.
type workerProc struct {
	p      *workerPool
	cmd    *Cmd
	run    *workerRun
	conn   *pylayer.Worker
	exited chan struct{}
	// hostKill: killed on purpose by the host (not a failure). broken: not to
	// be reused.
	hostKill atomic.Bool
	broken   atomic.Bool
	failed   atomic.Bool // counted as a failure already
	// pidfd refers to the confined program (-1 when it could not be opened): it
	// becomes readable the moment the program ends, before the host has reaped
	// anything, so that a worker that died idle is never handed a call.
	pidfd int
	fdMu  sync.Mutex // guards pidfd against its close
}

// ended reports whether the program has ended, as its pidfd says.
func (wp *workerProc) ended() bool {
	wp.fdMu.Lock()
	defer wp.fdMu.Unlock()
	if wp.pidfd < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(wp.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents != 0
}

func (wp *workerProc) closePidfd() {
	wp.fdMu.Lock()
	defer wp.fdMu.Unlock()
	if wp.pidfd >= 0 {
		unix.Close(wp.pidfd)
		wp.pidfd = -1
	}
}

func (wp *workerProc) usable() bool {
	if wp.broken.Load() {
		return false
	}
	select {
	case <-wp.exited:
		return false
	case <-wp.conn.Done():
		return false
	default:
		return !wp.ended()
	}
}

// kill ends the worker's process tree. host says the host decided it (not a
// failure of the worker).
func (wp *workerProc) kill(host bool, reason error) {
	if host {
		wp.hostKill.Store(true)
	}
	wp.broken.Store(true)
	wp.cmd.terminate(reason)
}

// stop closes the channel: the worker exits when idle; it is killed if it has
// not after stopGrace.
func (wp *workerProc) stop() {
	wp.hostKill.Store(true)
	wp.broken.Store(true)
	wp.conn.CloseWrite()
	go func() {
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-wp.exited:
		case <-t.C:
			wp.cmd.terminate(ErrSandboxClosed)
		}
	}()
}

// acquire returns a worker for a call, starting one when none is idle (after
// the restart policy's backoff), within the pool's size.
func (p *workerPool) acquire(ctx context.Context, fn string) (*workerProc, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("pysandboxes: call %s: waiting for a worker: %w", fn, ctx.Err())
	case <-p.closing:
		return nil, ErrSandboxClosed
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, ErrSandboxClosed
		}
		for len(p.idle) > 0 {
			wp := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			if wp.usable() {
				p.mu.Unlock()
				return wp, nil
			}
		}
		now := time.Now()
		fails := p.recentFailures(now)
		r := p.cfg.restart
		if len(fails) > r.Max {
			until := fails[len(fails)-r.Max-1].Add(r.Window)
			p.mu.Unlock()
			<-p.slots
			return nil, &WorkerError{Func: fn, Err: fmt.Errorf("%w (%d failures within %v; next attempt possible at %s)",
				ErrRestartLimit, len(fails), r.Window, until.Format(time.TimeOnly))}
		}
		var wait time.Duration
		if n := len(fails); n > 0 {
			d := float64(r.Backoff) * math.Pow(r.Factor, float64(n-1))
			wait = time.Until(fails[n-1].Add(time.Duration(min(d, float64(r.MaxBackoff)))))
		}
		p.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				<-p.slots
				return nil, fmt.Errorf("pysandboxes: call %s: waiting for a worker to restart: %w", fn, ctx.Err())
			case <-p.closing:
				t.Stop()
				<-p.slots
				return nil, ErrSandboxClosed
			}
			continue // an idle worker may have come back, or the budget changed
		}
		wp, err := p.start(ctx)
		if err != nil {
			<-p.slots
			if errors.Is(err, ErrSandboxClosed) {
				return nil, err
			}
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

// release gives a worker back after a call (nil: the slot only).
func (p *workerPool) release(wp *workerProc) {
	p.mu.Lock()
	switch {
	case wp == nil:
	case !wp.usable():
		// Replaced at the next acquire.
	case p.closed:
		wp.stop()
	default:
		p.idle = append(p.idle, wp)
	}
	p.mu.Unlock()
	<-p.slots
}

// recentFailures returns the failures within the window (under p.mu).
func (p *workerPool) recentFailures(now time.Time) []time.Time {
	i := 0
	for i < len(p.failures) && now.Sub(p.failures[i]) > p.cfg.restart.Window {
		i++
	}
	p.failures = p.failures[i:]
	return p.failures
}

func (p *workerPool) fail(wp *workerProc) {
	if wp != nil && !wp.failed.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.failures = append(p.failures, time.Now())
	}
	p.mu.Unlock()
}

// start starts one worker and waits until it is ready (its init function run).
func (p *workerPool) start(ctx context.Context) (*workerProc, error) {
	cmd := &Cmd{sb: p.s, ctx: p.ctx, Path: "python", Args: []string{"python"}, Dir: p.cfg.dir}
	run := &workerRun{p: p}
	cmd.ext = run
	cmd.Stdout, cmd.Stderr = p.out, p.errOut
	if f, ok := p.cfg.procOut.(*os.File); ok {
		cmd.Stdout = f
	}
	if f, ok := p.cfg.procErr.(*os.File); ok {
		cmd.Stderr = f
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrSandboxClosed
	}
	// Registered before it starts, so that Close waits for it.
	p.procs.Add(1)
	p.mu.Unlock()
	if err := cmd.Start(); err != nil {
		p.procs.Done()
		p.fail(nil)
		return nil, &WorkerError{Err: fmt.Errorf("starting the worker: %w", err)}
	}
	wp := &workerProc{p: p, cmd: cmd, run: run, conn: run.conn, exited: make(chan struct{}), pidfd: -1}
	if fd, err := unix.PidfdOpen(cmd.Pid(), 0); err == nil {
		wp.pidfd = fd
	} else if errors.Is(err, unix.ESRCH) {
		// The program ended already (ESRCH): the worker is never used.
		wp.broken.Store(true)
	}
	p.mu.Lock()
	p.all[wp] = true
	closed := p.closed
	p.mu.Unlock()
	go func() {
		defer p.procs.Done()
		_ = cmd.Wait()
		wp.closePidfd()
		close(wp.exited)
		p.mu.Lock()
		delete(p.all, wp)
		p.mu.Unlock()
		if !wp.hostKill.Load() && !errors.Is(cmd.killReason(), ErrOutputLimit) {
			p.fail(wp)
		}
	}()
	if closed {
		wp.kill(true, ErrSandboxClosed)
		return nil, ErrSandboxClosed
	}
	sctx, cancel := context.WithTimeout(ctx, p.cfg.startTimeout)
	defer cancel()
	err := wp.conn.Ready(sctx)
	if err == nil {
		return wp, nil
	}
	switch {
	case ctx.Err() != nil:
		// The caller gave up: not the worker's fault.
		wp.kill(true, ctx.Err())
		return nil, fmt.Errorf("pysandboxes: starting a worker: %w", ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		p.fail(wp)
		wp.kill(false, err)
		return nil, &WorkerError{Err: fmt.Errorf("the worker was not ready after %v: it was killed", p.cfg.startTimeout)}
	}
	p.fail(wp)
	wp.kill(false, err)
	var ie *pylayer.InitError
	if errors.As(err, &ie) {
		re := remoteError(p.cfg.init, ie.Exception, wp.conn)
		return nil, &WorkerError{Err: fmt.Errorf("the init function %s raised: %w", p.cfg.init, re)}
	}
	<-wp.exited
	return nil, &WorkerError{Err: p.exitError(wp, err)}
}

// exitError describes a worker's end (with its exit status when it is known).
func (p *workerPool) exitError(wp *workerProc, reason error) error {
	select {
	case <-wp.exited:
	default:
		return reason
	}
	if st, ok := wp.cmd.Status(); ok {
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
	w, captured := streams([2]io.Writer{o.Stdout, o.Stderr}, o.Capture != nil, p.callOut, &capt)
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
			wp.kill(true, cctx.Err())
			if ctx.Err() == nil {
				return nil, fmt.Errorf("pysandboxes: call %s timed out after %v: its worker was killed: %w", fn, timeout, context.DeadlineExceeded), false
			}
			return nil, fmt.Errorf("pysandboxes: call %s: its worker was killed: %w", fn, ctx.Err()), false
		case errors.Is(err, ErrOutputLimit):
			wp.kill(true, err)
			how := "Limits.Output"
			if captured && p.s.cfg.limits.Output <= 0 {
				how = "DefaultCallOutput, for captured output (raise Limits.Output, or stream it with CallOptions.Stdout and Stderr or CallConfig.Stdout)"
			}
			return nil, fmt.Errorf("pysandboxes: call %s: output limit of %d bytes exceeded (%s): its worker was killed: %w", fn, out.Limit, how, ErrOutputLimit), false
		case errors.Is(err, pylayer.ErrNotDelivered):
			wp.kill(false, err)
			return nil, &WorkerError{Func: fn, Err: err}, true
		}
		if !errors.Is(err, pylayer.ErrWorkerExited) {
			wp.kill(false, err)
		}
		// Wait (briefly) for the process to be reaped, to report its status.
		t := time.NewTimer(killGrace + time.Second)
		select {
		case <-wp.exited:
		case <-t.C:
		}
		t.Stop()
		if p.isClosed() && wp.hostKill.Load() {
			return nil, fmt.Errorf("pysandboxes: call %s: %w: its worker was killed", fn, ErrSandboxClosed), false
		}
		return nil, &WorkerError{Func: fn, Err: p.exitError(wp, err)}, false
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
		wp.kill(false, err)
		p.fail(wp)
	}
	return v, err, false
}

func (p *workerPool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// close stops the pool (see closeCalls) and learns.
func (p *workerPool) close() (*policy.LearnResult, error) {
	p.mu.Lock()
	p.closed = true
	close(p.closing)
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, wp := range idle {
		wp.stop()
	}
	drained := make(chan struct{})
	go func() {
		p.inflight.Wait()
		close(drained)
	}()
	t := time.NewTimer(p.cfg.grace)
	select {
	case <-drained:
	case <-t.C:
		p.mu.Lock()
		busy := make([]*workerProc, 0, len(p.all))
		for wp := range p.all {
			busy = append(busy, wp)
		}
		p.mu.Unlock()
		for _, wp := range busy {
			wp.kill(true, ErrSandboxClosed)
		}
		<-drained
	}
	t.Stop()
	// Workers that were busy are stopped once released; stop any left.
	p.mu.Lock()
	for wp := range p.all {
		if !wp.broken.Load() {
			wp.stop()
		}
	}
	p.mu.Unlock()
	p.procs.Wait()
	p.cancel()
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
		for _, e := range o.Env {
			if !env[e] {
				env[e] = true
				out.Env = append(out.Env, e)
			}
		}
		for _, f := range o.Files {
			if !files[f] {
				files[f] = true
				out.Files = append(out.Files, f)
			}
		}
		for _, n := range o.Net {
			if !nets[n] {
				nets[n] = true
				out.Net = append(out.Net, n)
			}
		}
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
		for _, m := range o.Imports {
			if !imps[m] {
				imps[m] = true
				out.Imports = append(out.Imports, m)
			}
		}
		for _, a := range o.API {
			if !api[a] {
				api[a] = true
				out.API = append(out.API, a)
			}
		}
		for _, l := range o.Eval {
			if !eval[l] {
				eval[l] = true
				out.Eval = append(out.Eval, l)
			}
		}
	}
	return out
}

// workerRun is the Python side of a worker's Cmd (its cmdExt).
type workerRun struct {
	p    *workerPool
	conn *pylayer.Worker
	dir  string
}

func (r *workerRun) prepare(c *Cmd) error {
	s := c.sb
	in, err := s.Interpreter(c.ctx)
	if err != nil {
		return err
	}
	c.Path = in.Path
	pp := s.policy
	guard := !s.cfg.python.layerOff && s.provider.Name() != "none"
	if on, _ := pp.PySandbox(); !on {
		guard = false
	}
	mode := pylayer.ModeEnforce
	learning := s.cfg.python.learn != ""
	if learning {
		mode = pylayer.ModeLearn
	}
	conn, err := pylayer.NewWorker(c.ctx, pylayer.ConfigInput{
		Policy: pp, Interp: in, Mode: mode, Provider: s.provider.Name(), RulesFile: pp.Path, LearnFile: s.cfg.python.learn,
	}, pylayer.WorkerOptions{
		Init: s.cfg.call.init, Guard: guard, MaxResult: s.cfg.call.maxResult, Path: s.cfg.call.path,
		Stdout: r.p.out, Stderr: r.p.errOut,
	})
	if err != nil {
		return err
	}
	r.conn = conn
	fd := 3 + len(c.ExtraFiles)
	c.ExtraFiles = append(c.ExtraFiles, conn.Session().ChildFile())
	c.Args = pylayer.Command(in, nil, fd)
	if learning {
		c.env = learningEnv(s)
	}
	r.dir = c.Dir
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

func (r *workerRun) started(c *Cmd) {
	r.conn.Session().Started(func(err error) { c.terminate(err) })
}

func (r *workerRun) abort() { r.conn.Session().Abort() }

func (r *workerRun) finish(c *Cmd) error {
	res := r.conn.Session().Finish(2 * time.Second)
	if res.DroppedDenials > 0 {
		c.sb.cfg.logger.Warn("Python layer: more refusals than kept", "dropped", res.DroppedDenials)
	}
	if c.sb.cfg.python.learn != "" && res.Armed {
		r.p.mu.Lock()
		r.p.obs = append(r.p.obs, res.Observations)
		r.p.mu.Unlock()
	}
	return nil
}

// killReason is why the sandbox ended the program (nil when it ended on its
// own).
func (c *Cmd) killReason() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// defaultStreams returns the calls' default writers (CallConfig.Stdout), under
// the lock of the processes' own output (they may be one writer); nil for a
// stream that is captured.
func defaultStreams(mu *sync.Mutex, cfg *callConfig) [2]io.Writer {
	var out [2]io.Writer
	if cfg.stdout != nil {
		out[0] = &lockedWriter{mu: mu, w: cfg.stdout}
	}
	if cfg.stderr != nil {
		out[1] = &lockedWriter{mu: mu, w: cfg.stderr}
	}
	return out
}

// lockedWriter serializes the writes of the worker processes' output and of
// the calls' default output, which may be one writer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
