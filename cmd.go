package pysandboxes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
)

// killGrace is how long a tree has to die after Terminate before its processes are
// killed directly.
const killGrace = 3 * time.Second

// Cmd is a program prepared to run in a Sandbox. It is used like an *exec.Cmd: set
// the fields, then call Run, Start and Wait, Output or CombinedOutput. Its
// environment is exactly the policy's. A Cmd cannot be reused.
type Cmd struct {
	// Path is the program to run. Command sets it from the name it is given, looked
	// up in the host's PATH when it holds no slash; a relative path is taken from Dir.
	Path string
	// Args holds the command line, Args[0] included.
	Args []string
	// Dir is the working directory ("" is the host's).
	Dir string
	// Stdin, Stdout and Stderr are as in exec.Cmd (nil is the null device).
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// ExtraFiles are passed to the program as descriptors 3, 4, ...
	ExtraFiles []*os.File
	// WaitDelay bounds how long Wait waits for the program's output to be closed
	// once the program has exited (0 means 5 seconds).
	WaitDelay time.Duration

	sb      *Sandbox
	ctx     context.Context
	lookErr error

	mu         sync.Mutex
	launch     *driver.Launch
	pid        int
	started    bool
	waited     bool
	status     syscall.WaitStatus
	reason     error
	stopCtx    func() bool
	killTimer  *time.Timer
	closeStart []io.Closer
	closeWait  []io.Closer
	stderrBuf  *tailBuffer
	pipeOut    map[io.Writer]bool // pipe ends made by StdoutPipe/StderrPipe
	counter    *outputLimit

	// ext extends a Cmd made by Sandbox.Python (nil for Command); env, when not
	// nil, replaces the policy's environment (learning mode).
	ext cmdExt
	env []string
	// channel is driver.Request.Channel (set by ext.prepare).
	channel int
}

// cmdExt is the hook points of a Cmd made by Sandbox.Python.
type cmdExt interface {
	// prepare runs in Start before the provider prepares the launch: it may set
	// Path, Args, ExtraFiles and env.
	prepare(c *Cmd) error
	// started runs once the program runs.
	started(c *Cmd)
	// abort runs when Start fails after prepare.
	abort()
	// finish runs in Wait once the program has ended; its error is joined to
	// Wait's.
	finish(c *Cmd) error
}

// Command returns a Cmd that runs name with args in the sandbox. The context ends
// the program's whole process tree when it is done.
func (s *Sandbox) Command(ctx context.Context, name string, args ...string) *Cmd {
	c := &Cmd{sb: s, ctx: ctx, Path: name, Args: append([]string{name}, args...)}
	if !strings.Contains(name, "/") {
		path, err := exec.LookPath(name)
		if err != nil {
			c.lookErr = err
		} else {
			c.Path = path
		}
	}
	return c
}

// String returns a human-readable description of the command.
func (c *Cmd) String() string {
	return strings.Join(append([]string{c.Path}, c.Args[min(1, len(c.Args)):]...), " ")
}

// Start starts the program confined by the sandbox's provider and returns once it
// runs. It fails, and nothing runs, when the provider cannot set up a restriction.
func (c *Cmd) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrAlreadyStarted
	}
	c.started = true
	if c.lookErr != nil {
		c.closeAll(c.closeStart)
		c.closeAll(c.closeWait)
		return c.lookErr
	}
	if c.ctx == nil {
		return errors.New("pysandboxes: nil context")
	}
	if err := c.ctx.Err(); err != nil {
		c.closeAll(c.closeStart)
		c.closeAll(c.closeWait)
		return err
	}
	if c.ext != nil {
		if err := c.ext.prepare(c); err != nil {
			c.closeAll(c.closeStart)
			c.closeAll(c.closeWait)
			return err
		}
	}
	path := c.Path
	if !filepath.IsAbs(path) {
		base := c.Dir
		if base == "" {
			base, _ = os.Getwd()
		}
		path = filepath.Join(base, path)
	}
	req := &driver.Request{
		Policy:     c.sb.osPolicy,
		Path:       path,
		Args:       c.Args,
		Env:        c.sb.policy.Environ(),
		Dir:        c.Dir,
		Limits:     c.sb.cfg.limits,
		ExtraFiles: c.ExtraFiles,
		Channel:    c.channel,
		Helper:     c.sb.cfg.helper,
		Logger:     c.sb.cfg.logger,
		Compiled:   c.sb.compiled,
	}
	if c.env != nil {
		req.Env = c.env
	}
	if c.sb.provider.Name() == "none" {
		req.Env = os.Environ()
	}
	l, err := c.sb.provider.Prepare(c.ctx, req)
	if err != nil {
		if c.ext != nil {
			c.ext.abort()
		}
		c.closeAll(c.closeStart)
		c.closeAll(c.closeWait)
		return fmt.Errorf("os-sandbox %s: %w", c.sb.provider.Name(), err)
	}
	c.launch = l
	c.setStdio(l.Cmd)
	delay := c.WaitDelay
	if delay == 0 {
		delay = 5 * time.Second
	}
	l.Cmd.WaitDelay = delay
	var pid int
	if l.Start != nil {
		pid, err = l.Start(c.ctx)
	} else if err = l.Cmd.Start(); err == nil {
		pid = l.Cmd.Process.Pid
	}
	c.closeAll(c.closeStart)
	if err != nil {
		if l.Cmd.Process != nil {
			_ = l.Cmd.Process.Kill()
			_ = l.Cmd.Wait()
		}
		c.cleanup()
		c.closeAll(c.closeWait)
		if c.ext != nil {
			c.ext.abort()
		}
		return err
	}
	c.pid = pid
	c.stopCtx = context.AfterFunc(c.ctx, func() { c.terminate(c.ctx.Err()) })
	if c.ext != nil {
		c.ext.started(c)
	}
	return nil
}

// setStdio connects the caller's streams, counting output when Limits.Output is set.
func (c *Cmd) setStdio(cmd *exec.Cmd) {
	cmd.Stdin = c.Stdin
	out, errw := c.Stdout, c.Stderr
	if counter := c.outputCounter(); counter != nil {
		// Pipes made by StdoutPipe/StderrPipe are counted on the reading side.
		if out != nil && !c.pipeOut[out] {
			out = counter.wrap(out)
		}
		if errw != nil && !c.pipeOut[errw] {
			errw = counter.wrap(errw)
		}
	}
	cmd.Stdout, cmd.Stderr = out, errw
}

// outputCounter returns the shared output counter when Limits.Output is set.
func (c *Cmd) outputCounter() *outputLimit {
	lim := c.sb.cfg.limits.Output
	if lim <= 0 {
		return nil
	}
	if c.counter == nil {
		c.counter = &outputLimit{limit: lim, exceeded: func() { c.terminate(ErrOutputLimit) }}
	}
	return c.counter
}

// terminate ends the program's tree for reason, then kills it directly if it is
// still there after killGrace.
func (c *Cmd) terminate(reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waited || c.launch == nil {
		return
	}
	if c.reason == nil {
		c.reason = reason
	}
	if c.killTimer != nil {
		return
	}
	c.killProcesses(false)
	c.killTimer = time.AfterFunc(killGrace, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.waited {
			c.killProcesses(true)
		}
	})
}

// killProcesses asks the launch to end the tree, or kills it directly when hard.
func (c *Cmd) killProcesses(hard bool) {
	l := c.launch
	if !hard && l.Terminate != nil {
		if err := l.Terminate(); err == nil {
			return
		}
	}
	if l.Cmd.Process != nil {
		_ = syscall.Kill(-l.Cmd.Process.Pid, syscall.SIGKILL)
		_ = l.Cmd.Process.Kill()
	}
	if c.pid > 0 {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	}
}

// Wait waits for the program to exit and for its output to be copied, then
// releases everything the sandbox made for it. It returns nil when the program
// exited with status 0 on its own, an *ExitError otherwise.
func (c *Cmd) Wait() error {
	c.mu.Lock()
	if c.launch == nil || c.pid == 0 {
		c.mu.Unlock()
		return ErrNotStarted
	}
	if c.waited {
		c.mu.Unlock()
		return errors.New("pysandboxes: Wait was already called")
	}
	l := c.launch
	c.mu.Unlock()

	werr := l.Cmd.Wait()
	var status syscall.WaitStatus
	var serr error
	if l.Status != nil {
		status, serr = l.Status()
	} else if ps := l.Cmd.ProcessState; ps != nil {
		status, _ = ps.Sys().(syscall.WaitStatus)
	}
	c.mu.Lock()
	c.waited = true
	c.status = status
	if c.killTimer != nil {
		c.killTimer.Stop()
	}
	reason := c.reason
	c.mu.Unlock()
	if c.stopCtx != nil {
		c.stopCtx()
	}
	cerr := c.cleanup()
	c.closeAll(c.closeWait)
	if c.ext != nil {
		if xerr := c.ext.finish(c); xerr != nil {
			cerr = errors.Join(cerr, xerr)
		}
		c.mu.Lock()
		reason = c.reason
		c.mu.Unlock()
	}

	if serr != nil {
		if ps := l.Cmd.ProcessState; ps != nil {
			// The supervisor died without reporting: report its own end.
			status, _ = ps.Sys().(syscall.WaitStatus)
			c.status = status
		}
		if reason == nil {
			return errors.Join(serr, cerr)
		}
	}
	if status.Exited() && status.ExitStatus() == 0 && reason == nil {
		var ee *exec.ExitError
		if werr != nil && !errors.As(werr, &ee) {
			return errors.Join(werr, cerr) // copying the output failed
		}
		return cerr
	}
	ee := &ExitError{Status: status, Err: reason}
	if c.stderrBuf != nil {
		ee.Stderr = c.stderrBuf.Bytes()
	}
	if cerr != nil {
		return errors.Join(ee, cerr)
	}
	return ee
}

func (c *Cmd) cleanup() error {
	if c.launch != nil && c.launch.Cleanup != nil {
		return c.launch.Cleanup()
	}
	return nil
}

func (c *Cmd) closeAll(cs []io.Closer) {
	for _, cl := range cs {
		cl.Close()
	}
}

// Run starts the program and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the program and returns its standard output. When Stderr is nil, the
// end of the program's standard error is kept in the *ExitError.
func (c *Cmd) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("pysandboxes: Stdout already set")
	}
	var out bytes.Buffer
	c.Stdout = &out
	if c.Stderr == nil {
		c.stderrBuf = &tailBuffer{max: 32 << 10}
		c.Stderr = c.stderrBuf
	}
	err := c.Run()
	return out.Bytes(), err
}

// CombinedOutput runs the program and returns its standard output and error.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.Stdout != nil || c.Stderr != nil {
		return nil, errors.New("pysandboxes: Stdout or Stderr already set")
	}
	var out syncBuffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.Bytes(), err
}

// StdinPipe returns a pipe connected to the program's standard input.
func (c *Cmd) StdinPipe() (io.WriteCloser, error) {
	if c.Stdin != nil || c.started {
		return nil, errors.New("pysandboxes: Stdin already set")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.Stdin = r
	c.closeStart = append(c.closeStart, r)
	wc := &closeOnce{File: w}
	c.closeWait = append(c.closeWait, wc)
	return wc, nil
}

// StdoutPipe returns a pipe connected to the program's standard output. Read it to
// the end before calling Wait.
func (c *Cmd) StdoutPipe() (io.ReadCloser, error) {
	if c.Stdout != nil || c.started {
		return nil, errors.New("pysandboxes: Stdout already set")
	}
	r, w, err := c.outPipe()
	if err == nil {
		c.Stdout = w
	}
	return r, err
}

// StderrPipe returns a pipe connected to the program's standard error. Read it to
// the end before calling Wait.
func (c *Cmd) StderrPipe() (io.ReadCloser, error) {
	if c.Stderr != nil || c.started {
		return nil, errors.New("pysandboxes: Stderr already set")
	}
	r, w, err := c.outPipe()
	if err == nil {
		c.Stderr = w
	}
	return r, err
}

// outPipe makes a pipe whose write end goes to the program as it is (closed in the
// host once started) and whose read end counts the output limit.
func (c *Cmd) outPipe() (io.ReadCloser, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if c.pipeOut == nil {
		c.pipeOut = map[io.Writer]bool{}
	}
	c.pipeOut[w] = true
	c.closeStart = append(c.closeStart, w)
	c.closeWait = append(c.closeWait, r)
	if counter := c.outputCounter(); counter != nil {
		return &limitedReader{o: counter, r: r}, w, nil
	}
	return r, w, nil
}

// Pid returns the program's process id once started (0 before).
func (c *Cmd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}

// Signal sends a signal to the program.
func (c *Cmd) Signal(sig os.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.launch == nil || c.pid == 0 {
		return ErrNotStarted
	}
	if c.waited {
		return os.ErrProcessDone
	}
	if c.launch.Signal != nil {
		return c.launch.Signal(sig)
	}
	return c.launch.Cmd.Process.Signal(sig)
}

// Terminate kills the program's whole process tree; Wait then reports an
// *ExitError whose Err is context.Canceled.
func (c *Cmd) Terminate() { c.terminate(context.Canceled) }

// ExitCode returns the program's exit status after Wait, or -1 when it has not
// exited or a signal ended it.
func (c *Cmd) ExitCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.waited || !c.status.Exited() {
		return -1
	}
	return c.status.ExitStatus()
}

// Status returns the program's wait status after Wait.
func (c *Cmd) Status() (syscall.WaitStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.waited
}

// ForwardSignals relays the signals sigs (SIGINT, SIGTERM, SIGHUP and SIGQUIT
// when none is given) that the host process receives to the program, until stop is
// called. It is meant for command-line wrappers, whose program should see the
// Ctrl-C of their terminal; the host then does not die of those signals itself.
func (c *Cmd) ForwardSignals(sigs ...os.Signal) (stop func()) {
	if len(sigs) == 0 {
		sigs = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
	}
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				_ = c.Signal(s)
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}
