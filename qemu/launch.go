package qemu

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
	"golang.org/x/sys/unix"
)

// placeholderMarker is argv[0] of the host process that stands for a program
// of a VM (what the Sandbox waits for and kills): the host binary started
// again, which waits for its descriptor 3 (a socket, the lifeline) to reach
// end of file, and sends the signals it gets that it forwards on it (one byte
// each), which the host relays to the program.
const placeholderMarker = "pysandboxes-qemu-program"

// forwardedSignals are the signals the placeholder forwards to the program,
// those the supervisor of the other providers forwards. Another signal ends
// the placeholder (its default action), and the program with it.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGALRM}

// placeholderMain takes the process over when it is a placeholder.
func placeholderMain() {
	if len(os.Args) == 0 || os.Args[0] != placeholderMarker {
		return
	}
	f := os.NewFile(3, "lifeline")
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	go func() {
		for s := range sigs {
			f.Write([]byte{byte(s.(syscall.Signal))})
		}
	}()
	var b [1]byte
	f.Read(b[:])
	os.Exit(0)
}

// compiled is a policy translated for the provider: what New keeps for the
// sandbox (the VM it keeps warm included).
type compiled struct {
	p       *Provider
	h       *hostState
	pol     driver.Policy
	params  params
	net     *netPlan
	exposes []policy.Expose
	ignores []policy.Ignore
	// served are the exposed directories an ignore= rule reaches, which
	// QEMU reads through the filter (view.go).
	served   []policy.Expose
	accepted driver.Capability
	resolver needs.Resolver
	pool     pool
	warnOnce sync.Once
}

// Warnings is what the sandbox's log says once (prepare.Compiled): the parts
// of net= rules that cannot be reached.
func (c *compiled) Warnings() ([]string, *sync.Once) {
	var w []string
	if c.net != nil && c.net.filter != nil {
		w = c.net.filter.Warnings()
	}
	return w, &c.warnOnce
}

// Compile translates the policy once per sandbox. It fails, naming the rule,
// on a qemu.* parameter it does not know or a net= rule it cannot enforce.
func (p *Provider) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (any, error) {
	return prepare.Compile(p.host().err, func() (*compiled, error) { return p.compile(ctx, pol, accepted) })
}

func (p *Provider) compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (*compiled, error) {
	prm, err := parseParams(pol)
	if err != nil {
		return nil, err
	}
	h := p.host()
	if prm.binary != "" || prm.kernel != "" {
		h = probeHost(ctx, prm.binary, prm.kernel, h.cgroups)
		if h.err != nil {
			return nil, h.err
		}
	}
	if prm.kvm == "on" && h.accel != "kvm" {
		return nil, fmt.Errorf("qemu.kvm=on: KVM does not work here: %s", h.accelWhy)
	}
	if err := checkCgroupParam(prm, h.cgroups); err != nil {
		return nil, err
	}
	np, err := planNetwork(pol.Network(), func() error { return p.netAvailable(ctx) })
	if err != nil {
		return nil, err
	}
	// /proc and /dev are the guest's own (plan.go): rules for them share
	// nothing, and the ignore= filter serves neither.
	exposes := slices.DeleteFunc(slices.Clone(pol.Exposes()), func(e policy.Expose) bool {
		return guestOwn(e.Path)
	})
	c := &compiled{p: p, h: h, pol: pol, params: prm, net: np, exposes: exposes, ignores: pol.Ignores(), accepted: accepted}
	if len(c.ignores) > 0 && hideview.Available() == nil {
		c.served = hideview.Filtered(c.exposes, c.ignores)
	}
	c.resolver.Interpreters = &p.core.Interps
	c.resolver.Env = pol.Environ()
	c.resolver.Writable = needs.WritableOf(exposes)
	c.resolver.Shown = needs.ShownOf(exposes)
	c.pool.c = c
	return c, nil
}

func (c *compiled) accel() string {
	if c.params.kvm == "off" {
		return "tcg"
	}
	return c.h.accel
}

// machine returns the machine of the sandbox's VMs.
func (c *compiled) machine() *machine {
	m := &machine{QEMU: c.h.qemu, Kernel: c.h.vmlinux, Initrd: c.h.initrd, Memory: c.params.memory, CPUs: c.params.cpus,
		Accel: c.accel(), Net: c.net != nil, Cmdline: c.h.cmdline, cgroups: c.h.cgroups}
	if m.Net {
		m.Netdev = guestNetdev
	}
	return c.h.confine(m)
}

// Prepare makes the launch of one program: a placeholder process on the host
// stands for it, while the program runs in the sandbox's VM.
func (p *Provider) Prepare(ctx context.Context, req *driver.Request) (*driver.Launch, error) {
	return prepare.Prepare(ctx, Name, req, p, p.host().err, func(c *compiled, logger *slog.Logger) (*driver.Launch, error) {
		return c.launch(ctx, req, logger)
	})
}

// launch is the launch of one program under c.
func (c *compiled) launch(ctx context.Context, req *driver.Request, logger *slog.Logger) (*driver.Launch, error) {
	if !filepath.IsAbs(req.Path) {
		return nil, fmt.Errorf("qemu: %q is not an absolute path", req.Path)
	}
	c.h.cgroups.warnUnbounded(logger)
	// The descriptors the program gets beyond 0, 1, 2: relayed by kind.
	extra := make([]hostFD, len(req.ExtraFiles))
	var dups []*os.File
	closeDups := func() {
		for _, f := range dups {
			f.Close()
		}
	}
	for i, f := range req.ExtraFiles {
		fd, d, err := relayFile(f)
		if err != nil {
			closeDups()
			return nil, fmt.Errorf("qemu: descriptor %d: %w", 3+i, err)
		}
		extra[i] = fd
		if d != nil {
			dups = append(dups, d)
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		closeDups()
		return nil, err
	}
	unix.SetNonblock(pair[0], true)
	lifeW, life := os.NewFile(uintptr(pair[0]), "lifeline"), os.NewFile(uintptr(pair[1]), "lifeline")
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{placeholderMarker}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{life}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r := &run{c: c, req: req, extra: extra, dups: dups, life: lifeW, lifeR: life, logger: logger, cmd: cmd}
	return &driver.Launch{
		Cmd:       cmd,
		Start:     r.start,
		Terminate: r.terminate,
		Signal:    r.signal,
		Status:    r.status,
		Cleanup:   r.cleanup,
	}, nil
}

// relayFile says how an extra file of the program is relayed: a socket both
// ways, a pipe one way (by its access mode). The file is duplicated (the
// caller closes its own).
func relayFile(f *os.File) (hostFD, *os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return hostFD{}, nil, err
	}
	nfd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return hostFD{}, nil, err
	}
	fl, err := unix.FcntlInt(uintptr(nfd), unix.F_GETFL, 0)
	if err != nil {
		unix.Close(nfd)
		return hostFD{}, nil, err
	}
	unix.SetNonblock(nfd, true)
	d := os.NewFile(uintptr(nfd), f.Name())
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return hostFD{Dir: wire.Both, R: d, W: d,
			CloseW: func() { unix.Shutdown(nfd, unix.SHUT_WR) },
			StopR:  func() { d.SetReadDeadline(time.Now()) }}, d, nil
	case unix.S_IFIFO:
		if fl&unix.O_ACCMODE == unix.O_RDONLY {
			return hostFD{Dir: wire.In, R: d, StopR: func() { d.SetReadDeadline(time.Now()) }}, d, nil
		}
		return hostFD{Dir: wire.Out, W: d, CloseW: func() { d.Close() }}, d, nil
	}
	d.Close()
	return hostFD{}, nil, fmt.Errorf("a %s cannot be relayed into the VM (sockets and pipes only)", fileKind(st.Mode))
}

func fileKind(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFCHR:
		return "character device"
	}
	return "file of this kind"
}

// run is one program of a VM.
type run struct {
	c      *compiled
	req    *driver.Request
	extra  []hostFD
	dups   []*os.File
	life   *os.File // the placeholder's lifeline (closing it ends the placeholder; it sends signals)
	lifeR  *os.File
	logger *slog.Logger
	cmd    *exec.Cmd

	ent  *vmEntry
	proc *hproc
	// outs are the relays of the program's output, drained before its end is
	// reported.
	outs []*hstream
	// stdin, stdout and stderr of the caller (taken from the placeholder's
	// command).
	stdin          io.Reader
	stdout, stderr io.Writer
	stdinStop      func()
	done           chan struct{}
	// vmStopped: the program was its VM's last, which is being stopped.
	vmStopped bool
	wstatus   syscall.WaitStatus
	err       error
}

func (r *run) start(ctx context.Context) (int, error) {
	cmd := r.cmd
	// The program's standard streams are relayed by the host: the
	// placeholder gets none.
	r.stdin, r.stdout, r.stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	fds, err := r.stdio()
	if err != nil {
		return 0, err
	}
	fds = append(fds, r.extra...)
	sctx, cancel := context.WithTimeout(ctx, r.c.params.startTimeout)
	defer cancel()
	ns, err := r.c.resolver.Needs(sctx, r.req.Path)
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == r.req.Path {
		ns, err = nil, nil
	}
	if err != nil {
		return 0, fmt.Errorf("qemu: cannot tell what %s needs to run: %w", r.req.Path, err)
	}
	ent, err := r.c.pool.acquire(sctx, ns, r.logger)
	if err != nil {
		return 0, err
	}
	r.ent = ent
	uid, gid := ownIDs()
	m := wire.SpawnMsg{Path: r.req.Path, Args: r.req.Args, Env: r.req.Env, Dir: r.dir(), UID: uid, GID: gid, Rlimits: rlimits(r.req.Limits)}
	if m.Env == nil {
		m.Env = []string{}
	}
	proc, err := ent.v.spawn(m, fds, r.req.Channel)
	if err != nil {
		r.c.pool.release(ent, true)
		return 0, err
	}
	r.proc = proc
	for _, s := range proc.streams {
		if s.fast != nil {
			r.logger.Debug("os-sandbox qemu: the channel on the VM's own port", "fd", r.req.Channel)
		}
	}
	for _, s := range proc.streams {
		if s.fd.Dir == wire.Out || s.fd.Dir == wire.Both {
			r.outs = append(r.outs, s)
		}
	}
	select {
	case <-proc.startCh:
	case <-sctx.Done():
		ent.v.signal(proc, syscall.SIGKILL)
		r.c.pool.release(ent, true)
		return 0, fmt.Errorf("qemu: starting %s: %w", r.req.Path, sctx.Err())
	}
	select {
	case <-proc.exitCh:
		if proc.pid == 0 && proc.msg != "" {
			r.c.pool.release(ent, false)
			return 0, &startError{path: r.req.Path, msg: proc.msg}
		}
	default:
	}
	if err := cmd.Start(); err != nil {
		ent.v.signal(proc, syscall.SIGKILL)
		r.c.pool.release(ent, true)
		return 0, err
	}
	r.lifeR.Close()
	r.done = make(chan struct{})
	go r.watch()
	go r.forward()
	return cmd.Process.Pid, nil
}

// forward relays the signals the placeholder forwards to the program, until
// the lifeline closes. A placeholder that ends first was killed: the program
// is killed with it, as a program with its supervisor under the other
// providers.
func (r *run) forward() {
	var b [16]byte
	for {
		n, err := r.life.Read(b[:])
		for _, s := range b[:n] {
			r.signal(syscall.Signal(s))
		}
		if errors.Is(err, io.EOF) {
			select {
			case <-r.done:
			default:
				r.ent.v.signal(r.proc, syscall.SIGKILL)
			}
		}
		if err != nil {
			return
		}
	}
}

// startError reports a program the guest could not start.
type startError struct{ path, msg string }

func (e *startError) Error() string { return "qemu: " + e.msg }

// Unwrap makes a missing program an fs.ErrNotExist.
func (e *startError) Unwrap() error {
	for _, s := range []struct {
		txt string
		err error
	}{{"no such file or directory", os.ErrNotExist}, {"permission denied", os.ErrPermission}} {
		if contains(e.msg, s.txt) {
			return s.err
		}
	}
	return nil
}

// watch waits for the program's end and its output, then ends the
// placeholder.
func (r *run) watch() {
	p := r.proc
	<-p.exitCh
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for _, s := range r.outs {
		select {
		case <-s.drained:
		case <-deadline.C:
		}
	}
	if r.stdinStop != nil {
		r.stdinStop()
	}
	r.ent.v.forget(p)
	r.wstatus = p.status
	if p.lostErr != nil {
		r.err = p.lostErr
	}
	r.vmStopped = r.c.pool.release(r.ent, p.lostErr != nil)
	close(r.done)
	r.life.Close()
}

func (r *run) terminate() error {
	if r.proc == nil {
		return os.ErrProcessDone
	}
	return r.ent.v.signal(r.proc, syscall.SIGKILL)
}

func (r *run) signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok || r.proc == nil {
		return errors.New("qemu: unsupported signal")
	}
	if s < 0 || s > 64 {
		return fmt.Errorf("qemu: signal %d: %w", int(s), syscall.EINVAL)
	}
	select {
	case <-r.done:
		return os.ErrProcessDone
	default:
	}
	if s == 0 { // the program runs
		return nil
	}
	return r.ent.v.signal(r.proc, s)
}

// status is the program's wait status, once the placeholder has exited. A
// placeholder that ended while the program still runs was killed: the program
// is killed with it (as a program with its supervisor under the other
// providers), and a guest that does not answer the kill within 2 s ends
// with its VM.
func (r *run) status() (syscall.WaitStatus, error) {
	if r.done == nil {
		return 0, errors.New("qemu: not started")
	}
	select {
	case <-r.done:
	default:
		r.ent.v.signal(r.proc, syscall.SIGKILL)
		select {
		case <-r.done:
		case <-time.After(2 * time.Second):
			r.ent.v.kill()
			<-r.done
		}
	}
	return r.wstatus, r.err
}

// releaseWait bounds how long the end of a VM's last program waits for the
// VM's release: QEMU's end, then the filters' (which wait 2 s for their
// connections to end before they are stopped).
const releaseWait = 5 * time.Second

func (r *run) cleanup() error {
	for _, f := range r.dups {
		f.Close()
	}
	r.life.Close()
	r.lifeR.Close()
	// The last program of a VM is waited for until its QEMU has exited and
	// everything of the VM on the host is released: its descriptors, QEMU's
	// cgroup, the filters of ignore= (at most releaseWait): nothing of the
	// VM is left on the host after Wait, even when the host process exits
	// next.
	if r.done != nil {
		select {
		case <-r.done:
			if r.vmStopped {
				select {
				case <-r.ent.v.released:
				case <-time.After(releaseWait):
				}
			}
		default:
		}
	}
	return nil
}

// dir is the program's working directory.
func (r *run) dir() string {
	return prepare.RealWorkDir(r.req.Dir)
}

// stdio makes the relays of the caller's standard streams.
func (r *run) stdio() ([]hostFD, error) {
	fds := make([]hostFD, 3)
	if r.stdin != nil {
		in := r.stdin
		var stop func()
		if f, ok := in.(*os.File); ok {
			nfd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return nil, err
			}
			unix.SetNonblock(nfd, true)
			d := os.NewFile(uintptr(nfd), "stdin")
			r.dups = append(r.dups, d)
			in = d
			stop = func() { d.SetReadDeadline(time.Now()) }
		}
		r.stdinStop = stop
		fds[0] = hostFD{Dir: wire.In, R: in, StopR: stop}
	}
	for i, w := range []io.Writer{r.stdout, r.stderr} {
		if w == nil {
			continue
		}
		fd := hostFD{Dir: wire.Out, W: w}
		// A file (a pipe the caller reads, say) is the caller's to close once
		// the program started: the relay writes to a copy of its own, closed
		// when the program closes its end.
		if f, ok := w.(*os.File); ok {
			nfd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return nil, err
			}
			d := os.NewFile(uintptr(nfd), f.Name())
			r.dups = append(r.dups, d)
			fd.W, fd.CloseW = d, func() { d.Close() }
		}
		fds[1+i] = fd
	}
	return fds, nil
}

// ownIDs are the ids the program runs as in the guest: the owner of the
// shared files as QEMU sees them (QEMU's own ids).
func ownIDs() (uint32, uint32) { return uint32(os.Geteuid()), uint32(os.Getegid()) }

// rlimits are the limits as (resource, soft, hard).
func rlimits(l driver.Limits) [][3]uint64 {
	var out [][3]uint64
	if l.CPUTime > 0 {
		secs := uint64((l.CPUTime + time.Second - 1) / time.Second)
		out = append(out, [3]uint64{unix.RLIMIT_CPU, secs, secs + 1})
	}
	for _, x := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_AS, l.AddressSpace}, {unix.RLIMIT_NOFILE, l.OpenFiles}, {unix.RLIMIT_NPROC, l.Processes}, {unix.RLIMIT_FSIZE, l.FileSize}} {
		if x.v > 0 {
			out = append(out, [3]uint64{uint64(x.res), x.v, x.v})
		}
	}
	return out
}

func contains(s, sub string) bool {
	return len(sub) <= len(s) && (func() bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
		return false
	})()
}

// seed returns fresh randomness for a guest.
func seed() []byte {
	b := make([]byte, 64)
	rand.Read(b)
	return b
}
