// Package pypool supervises the long-lived Python processes of one sandbox:
// the workers behind Call and the eval zygote behind Eval. It owns what both
// share: the slots that bound the work in flight, the start of a process and
// the wait for its readiness (bounded by a start timeout), the restart policy
// (a budget of failures within a window, and a growing backoff), the reaping
// of every process and the counting of its end as a failure or not, the
// orderly stop of an idle process, Close with its grace period, and the relay
// of the processes' own output.
//
// The pool knows a process by two small interfaces: Process (start, wait,
// terminate, status: the root's Cmd, whatever provider launches it) and
// Channel (the host's end of the byte channel to the Python side: its end, and
// the close that tells the process to exit). Nothing here depends on how the
// channel is carried: a Pipe (the socketpair the host makes, whose child end it
// passes as an extra descriptor), or the same bytes relayed over a VM device by
// the qemu provider.
package pypool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Restart bounds the restarts of failing processes.
type Restart struct {
	// Max failures are allowed within Window; past them, a start is refused
	// until the oldest failure leaves the window.
	Max    int
	Window time.Duration
	// Backoff is the delay after one failure in the window; each further
	// failure multiplies it by Factor, up to MaxBackoff.
	Backoff    time.Duration
	Factor     float64
	MaxBackoff time.Duration
}

// Config configures a Pool.
type Config struct {
	// Slots is how many pieces of work run at once (at least 1).
	Slots   int
	Restart Restart
	// StartTimeout bounds a start, readiness included.
	StartTimeout time.Duration
	// Grace is how long Close waits for the work in flight before it kills
	// the processes.
	Grace time.Duration
	// StopGrace is how long a process whose channel was closed has to exit
	// before it is killed.
	StopGrace time.Duration
	// KillWait is how long the pool waits for a killed process to be reaped,
	// to report its status.
	KillWait time.Duration
	// Closed is the error of any use after Close; RestartLimit is wrapped by
	// the error of a start refused by the restart budget.
	Closed, RestartLimit error
}

// Process is one supervised process, as the pool drives it.
type Process interface {
	Start() error
	Wait() error
	Pid() int
	// Terminate ends the process's tree for reason.
	Terminate(reason error)
	// Status is the wait status, once the process has been reaped.
	Status() (syscall.WaitStatus, bool)
}

// Channel is the host's end of the byte channel to a process's Python side.
type Channel interface {
	// Done is closed when the channel has ended (the process is gone, or
	// broke the protocol).
	Done() <-chan struct{}
	// CloseWrite ends the host's side: an idle process then exits.
	CloseWrite()
}

// Spawn is one process to start.
type Spawn struct {
	Process Process
	// Channel returns the process's channel, once it has started.
	Channel func() Channel
	// Ready waits until the process is ready (bounded by the pool's
	// StartTimeout).
	Ready func(ctx context.Context) error
	// Counts reports whether an end the host did not cause is a failure
	// (nil: always).
	Counts func() bool
}

// SpawnError reports a process that could not be started.
type SpawnError struct{ Err error }

func (e *SpawnError) Error() string { return e.Err.Error() }
func (e *SpawnError) Unwrap() error { return e.Err }

// CanceledError reports a start the caller gave up (its context ended): the
// process was killed, and its end is not a failure.
type CanceledError struct{ Err error }

func (e *CanceledError) Error() string { return e.Err.Error() }
func (e *CanceledError) Unwrap() error { return e.Err }

// NotReadyError reports a process that was not ready after the start timeout:
// it was killed, and its end counted as a failure.
type NotReadyError struct{ After time.Duration }

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("not ready after %v", e.After)
}

// Pool supervises the processes of one kind.
type Pool struct {
	cfg   Config
	slots chan struct{}
	// ctx is the processes' context: it ends once Close has reaped them.
	ctx     context.Context
	cancel  context.CancelFunc
	closing chan struct{}

	mu       sync.Mutex
	closed   bool
	all      map[*Proc]bool
	failures []time.Time
	inflight sync.WaitGroup
	procs    sync.WaitGroup
}

// New returns a pool.
func New(cfg Config) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{cfg: cfg, slots: make(chan struct{}, max(cfg.Slots, 1)), ctx: ctx, cancel: cancel,
		closing: make(chan struct{}), all: map[*Proc]bool{}}
}

// Context is the processes' context (to start them with): it ends after Close.
func (p *Pool) Context() context.Context { return p.ctx }

// Slots is the number of slots.
func (p *Pool) Slots() int { return cap(p.slots) }

// Closing is closed when Close begins.
func (p *Pool) Closing() <-chan struct{} { return p.closing }

// Enter counts a piece of work in flight (false once closed); Leave ends it.
func (p *Pool) Enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.inflight.Add(1)
	return true
}

// Leave ends a piece of work counted by Enter.
func (p *Pool) Leave() { p.inflight.Done() }

// IsClosed reports whether Close has begun.
func (p *Pool) IsClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// TakeSlot waits for a free slot: nil, ctx's error (unwrapped), or the
// Closed error.
func (p *Pool) TakeSlot(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closing:
		return p.cfg.Closed
	}
}

// FreeSlot gives a slot back.
func (p *Pool) FreeSlot() { <-p.slots }

// Budget returns how long to wait before the next start (the backoff), or
// the error of a start the restart budget refuses.
func (p *Pool) Budget() (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.cfg.Restart
	now := time.Now()
	i := 0
	for i < len(p.failures) && now.Sub(p.failures[i]) > r.Window {
		i++
	}
	p.failures = p.failures[i:]
	fails := p.failures
	if len(fails) > r.Max {
		until := fails[len(fails)-r.Max-1].Add(r.Window)
		return 0, fmt.Errorf("%w (%d failures within %v; next attempt possible at %s)",
			p.cfg.RestartLimit, len(fails), r.Window, until.Format(time.TimeOnly))
	}
	n := len(fails)
	if n == 0 {
		return 0, nil
	}
	d := float64(r.Backoff) * math.Pow(r.Factor, float64(n-1))
	return time.Until(fails[n-1].Add(time.Duration(min(d, float64(r.MaxBackoff))))), nil
}

// Backoff waits d: nil, ctx's error (unwrapped), or the Closed error.
func (p *Pool) Backoff(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closing:
		return p.cfg.Closed
	}
}

// Fail counts a failure of x (nil: of a process that could not start), once
// per process.
func (p *Pool) Fail(x *Proc) {
	if x != nil && !x.failed.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.failures = append(p.failures, time.Now())
	}
	p.mu.Unlock()
}

// Start starts a process and waits until it is ready. Its errors: the Closed
// error; a *SpawnError (counted as a failure); a *CanceledError; a
// *NotReadyError; or Ready's error, with the process killed and counted as a
// failure (the *Proc is returned then, to describe its end).
func (p *Pool) Start(ctx context.Context, s Spawn) (*Proc, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, p.cfg.Closed
	}
	// Registered before it starts, so that Close waits for it.
	p.procs.Add(1)
	p.mu.Unlock()
	if err := s.Process.Start(); err != nil {
		p.procs.Done()
		p.Fail(nil)
		return nil, &SpawnError{Err: err}
	}
	x := &Proc{p: p, proc: s.Process, ch: s.Channel(), exited: make(chan struct{}), pidfd: -1}
	if fd, err := unix.PidfdOpen(s.Process.Pid(), 0); err == nil {
		x.pidfd = fd
	} else if errors.Is(err, unix.ESRCH) {
		// The program ended already: the process is never used.
		x.broken.Store(true)
	}
	p.mu.Lock()
	p.all[x] = true
	closed := p.closed
	p.mu.Unlock()
	go func() {
		defer p.procs.Done()
		_ = s.Process.Wait()
		x.closePidfd()
		if !x.hostKill.Load() && (s.Counts == nil || s.Counts()) {
			p.Fail(x)
		}
		p.mu.Lock()
		delete(p.all, x)
		p.mu.Unlock()
		close(x.exited)
	}()
	if closed {
		x.Kill(true, p.cfg.Closed)
		return nil, p.cfg.Closed
	}
	sctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	err := s.Ready(sctx)
	switch {
	case err == nil:
		return x, nil
	case ctx.Err() != nil:
		// The caller gave up: not the process's fault.
		x.Kill(true, ctx.Err())
		return nil, &CanceledError{Err: ctx.Err()}
	case errors.Is(err, context.DeadlineExceeded):
		p.Fail(x)
		x.Kill(false, err)
		return nil, &NotReadyError{After: p.cfg.StartTimeout}
	}
	p.Fail(x)
	x.Kill(false, err)
	return x, err
}

// Close stops the pool: no new work; onClosed runs once the pool is marked
// closed (to stop the idle processes); the work in flight has the grace
// period, then every process is killed; the others are stopped, and all are
// reaped.
func (p *Pool) Close(onClosed func()) {
	p.mu.Lock()
	p.closed = true
	close(p.closing)
	p.mu.Unlock()
	if onClosed != nil {
		onClosed()
	}
	drained := make(chan struct{})
	go func() {
		p.inflight.Wait()
		close(drained)
	}()
	t := time.NewTimer(p.cfg.Grace)
	select {
	case <-drained:
	case <-t.C:
		for _, x := range p.live() {
			x.Kill(true, p.cfg.Closed)
		}
		<-drained
	}
	t.Stop()
	// Processes that were busy are stopped once released; stop any left.
	for _, x := range p.live() {
		if !x.broken.Load() {
			x.Stop()
		}
	}
	p.procs.Wait()
	p.cancel()
}

func (p *Pool) live() []*Proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Proc, 0, len(p.all))
	for x := range p.all {
		out = append(out, x)
	}
	return out
}

// Proc is one supervised process.
type Proc struct {
	p      *Pool
	proc   Process
	ch     Channel
	exited chan struct{}
	// hostKill: ended on purpose by the host (not a failure). broken: not to
	// be reused. failed: counted as a failure already.
	hostKill atomic.Bool
	broken   atomic.Bool
	failed   atomic.Bool
	// pidfd refers to the program (-1 when it could not be opened): it becomes
	// readable the moment the program ends, before the host has reaped
	// anything, so that a process that died idle is never handed work.
	pidfd int
	fdMu  sync.Mutex // guards pidfd against its close
}

// Exited is closed once the process has been reaped.
func (x *Proc) Exited() <-chan struct{} { return x.exited }

// HostKilled reports whether the host ended the process on purpose.
func (x *Proc) HostKilled() bool { return x.hostKill.Load() }

// Usable reports whether the process may take work: not broken, not ended,
// its channel open.
func (x *Proc) Usable() bool {
	if x.broken.Load() {
		return false
	}
	select {
	case <-x.exited:
		return false
	case <-x.ch.Done():
		return false
	default:
		return !x.ended()
	}
}

// ended reports whether the program has ended, as its pidfd says.
func (x *Proc) ended() bool {
	x.fdMu.Lock()
	defer x.fdMu.Unlock()
	if x.pidfd < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(x.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents != 0
}

func (x *Proc) closePidfd() {
	x.fdMu.Lock()
	defer x.fdMu.Unlock()
	if x.pidfd >= 0 {
		unix.Close(x.pidfd)
		x.pidfd = -1
	}
}

// Kill ends the process's tree. host says the host decided it (not a failure
// of the process).
func (x *Proc) Kill(host bool, reason error) {
	if host {
		x.hostKill.Store(true)
	}
	x.broken.Store(true)
	x.proc.Terminate(reason)
}

// Stop closes the channel: the process exits when idle; it is killed if it
// has not after the pool's StopGrace.
func (x *Proc) Stop() {
	x.hostKill.Store(true)
	x.broken.Store(true)
	x.ch.CloseWrite()
	go func() {
		t := time.NewTimer(x.p.cfg.StopGrace)
		defer t.Stop()
		select {
		case <-x.exited:
		case <-t.C:
			x.proc.Terminate(x.p.cfg.Closed)
		}
	}()
}

// WaitExit waits, at most the pool's KillWait, for the process to be reaped.
func (x *Proc) WaitExit() {
	t := time.NewTimer(x.p.cfg.KillWait)
	defer t.Stop()
	select {
	case <-x.exited:
	case <-t.C:
	}
}

// Status is the process's wait status, once it has been reaped.
func (x *Proc) Status() (syscall.WaitStatus, bool) {
	select {
	case <-x.exited:
		return x.proc.Status()
	default:
		return 0, false
	}
}
