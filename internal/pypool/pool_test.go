package pypool

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

var (
	errClosed = errors.New("closed")
	errLimit  = errors.New("restart limit")
)

// shProc is a real shell process: its channel is its standard input (closed
// by CloseWrite) and output (its end is Done); it is ready once it printed a
// line.
type shProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	ready chan struct{}
	done  chan struct{}
}

func newSh(t *testing.T, script string) *shProc {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	return &shProc{cmd: cmd, in: in, out: bufio.NewReader(out), ready: make(chan struct{}), done: make(chan struct{})}
}

func (p *shProc) Start() error {
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() {
		defer close(p.done)
		if _, err := p.out.ReadString('\n'); err == nil {
			close(p.ready)
		}
		_, _ = io.Copy(io.Discard, p.out)
	}()
	return nil
}

func (p *shProc) Wait() error {
	<-p.done
	return p.cmd.Wait()
}
func (p *shProc) Pid() int               { return p.cmd.Process.Pid }
func (p *shProc) Terminate(reason error) { _ = p.cmd.Process.Kill() }
func (p *shProc) Status() (syscall.WaitStatus, bool) {
	if p.cmd.ProcessState == nil {
		return 0, false
	}
	return p.cmd.ProcessState.Sys().(syscall.WaitStatus), true
}
func (p *shProc) Done() <-chan struct{} { return p.done }
func (p *shProc) CloseWrite()           { p.in.Close() }

func (p *shProc) spawn() Spawn {
	return Spawn{Process: p, Channel: func() Channel { return p }, Ready: func(ctx context.Context) error {
		select {
		case <-p.ready:
			return nil
		case <-p.done:
			return errors.New("ended before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

func testPool(budget int) *Pool {
	return New(Config{Slots: 1, Restart: Restart{Max: budget, Window: time.Hour, Backoff: time.Millisecond, Factor: 2, MaxBackoff: time.Second},
		StartTimeout: 20 * time.Second, Grace: 100 * time.Millisecond, StopGrace: 5 * time.Second, KillWait: 10 * time.Second,
		Closed: errClosed, RestartLimit: errLimit})
}

// A process stopped by the host exits on the closed channel and is no failure.
func TestStopIsNotAFailure(t *testing.T) {
	p := testPool(0)
	x, err := p.Start(context.Background(), newSh(t, "echo ready; read x; exit 0").spawn())
	if err != nil {
		t.Fatal(err)
	}
	if !x.Usable() {
		t.Fatal("a ready process is not usable")
	}
	x.Stop()
	<-x.Exited()
	if st, ok := x.Status(); !ok || !st.Exited() || st.ExitStatus() != 0 {
		t.Fatalf("status %v %v, want exit status 0", st, ok)
	}
	if _, err := p.Budget(); err != nil {
		t.Fatalf("a stop was counted as a failure: %v", err)
	}
	p.Close(nil)
}

// Processes that end on their own count, with a growing backoff, until the
// budget refuses the next start with the RestartLimit error.
func TestFailuresExhaustTheBudget(t *testing.T) {
	p := testPool(2)
	defer p.Close(nil)
	for i := range 3 {
		if _, err := p.Budget(); err != nil {
			t.Fatalf("start %d refused: %v", i, err)
		}
		x, err := p.Start(context.Background(), newSh(t, "echo ready; exit 3").spawn())
		if err != nil {
			t.Fatal(err)
		}
		<-x.Exited()
		if st, ok := x.Status(); !ok || st.ExitStatus() != 3 {
			t.Fatalf("status %v %v, want exit status 3", st, ok)
		}
	}
	_, err := p.Budget()
	if !errors.Is(err, errLimit) {
		t.Fatalf("after 3 failures with Max 2: %v, want the restart limit", err)
	}
}

// A process never ready is killed at the start timeout and counted.
func TestNotReady(t *testing.T) {
	p := testPool(0)
	p.cfg.StartTimeout = 200 * time.Millisecond
	defer p.Close(nil)
	_, err := p.Start(context.Background(), newSh(t, "read x").spawn())
	var ne *NotReadyError
	if !errors.As(err, &ne) {
		t.Fatalf("got %v, want a *NotReadyError", err)
	}
	if _, err := p.Budget(); !errors.Is(err, errLimit) {
		t.Fatalf("the timeout was not counted: %v", err)
	}
}

// A caller that gives up kills the process without counting a failure.
func TestCanceledStart(t *testing.T) {
	p := testPool(0)
	defer p.Close(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.Start(ctx, newSh(t, "read x").spawn())
	var ce *CanceledError
	if !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a *CanceledError wrapping the context's error", err)
	}
	time.Sleep(50 * time.Millisecond) // let the reaper run
	if _, err := p.Budget(); err != nil {
		t.Fatalf("a canceled start was counted: %v", err)
	}
}

// Close kills a busy process after the grace period, reaps it, and refuses
// further use.
func TestCloseKillsAfterGrace(t *testing.T) {
	p := testPool(0)
	if !p.Enter() {
		t.Fatal("Enter refused on an open pool")
	}
	// A busy process: it ignores its closed channel.
	x, err := p.Start(context.Background(), newSh(t, "echo ready; exec sleep 60").spawn())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-x.Exited()
		p.Leave()
	}()
	p.Close(nil)
	select {
	case <-x.Exited():
	default:
		t.Fatal("Close returned before the process was reaped")
	}
	if st, ok := x.Status(); !ok || st.Signal() != syscall.SIGKILL || !x.HostKilled() {
		t.Fatalf("status %v %v (host kill %v), want killed by the host", st, ok, x.HostKilled())
	}
	if p.Enter() {
		t.Fatal("Enter accepted after Close")
	}
	if _, err := p.Start(context.Background(), newSh(t, "true").spawn()); err != errClosed {
		t.Fatalf("Start after Close: %v, want the Closed error", err)
	}
}
