package security

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

// outcome is what a check decided from one run.
type outcome int

const (
	outBlocked outcome = iota
	outThrough
	outUnclear
	outSkipped
	// outRefused: the provider refused the policy the attack needs, naming the
	// rule (fail closed): the attack cannot even be set up.
	outRefused
)

// errStart marks a program that the sandbox could not start.
var errStart = errors.New("start")

// refusedRule returns the net= rule of rules that err names, when err is the
// provider's refusal of that rule itself ("" otherwise: a refusal because the
// provider's network filter cannot work on this host is not one).
func refusedRule(rules []string, err error) string {
	msg := err.Error()
	if strings.Contains(msg, "cannot work here") {
		return ""
	}
	for _, r := range rules {
		if strings.HasPrefix(r, "net=") && strings.Contains(msg, r) {
			return r
		}
	}
	return ""
}

// env is the world of one attack run: a fresh temporary directory, the run's
// secret, and what the host set up (listeners, sleepers), released by close.
type env struct {
	ctx      context.Context
	provider pysandboxes.Provider
	// root is a fresh directory (canonical path), removed by close.
	root string
	// secret is the run's secret: its bytes must never appear in the output of a
	// blocked attack.
	secret string
	// mark is put in the environment of every program of the run
	// (PYSB_MARK=mark), which finds its processes in /proc.
	mark string

	err      error  // first setup error
	skip     string // why the attack cannot run here
	cleanups []func()
}

// markVar names the variable that marks the processes of a run.
const markVar = "PYSB_MARK"

// tempPrefix starts the name of every temporary directory of the corpus.
const tempPrefix = "pysb-security-"

func newEnv(ctx context.Context, p pysandboxes.Provider) (*env, error) {
	dir, err := os.MkdirTemp("", tempPrefix+"*")
	if err != nil {
		return nil, err
	}
	e := &env{ctx: ctx, provider: p, secret: "SECRET" + token(16), mark: token(8)}
	e.cleanups = append(e.cleanups, func() { os.RemoveAll(dir) })
	if e.root, err = filepath.EvalSymlinks(dir); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// close releases everything, last made first.
func (e *env) close() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

func (e *env) cleanup(f func()) { e.cleanups = append(e.cleanups, f) }

// fail records the first setup error.
func (e *env) fail(err error) {
	if err != nil && e.err == nil {
		e.err = err
	}
}

// skipf records why the attack cannot run here.
func (e *env) skipf(format string, args ...any) {
	if e.skip == "" {
		e.skip = fmt.Sprintf(format, args...)
	}
}

func token(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// path joins names under the run's directory.
func (e *env) path(names ...string) string {
	return filepath.Join(append([]string{e.root}, names...)...)
}

// dir makes a directory under the run's directory and returns its path.
func (e *env) dir(names ...string) string {
	p := e.path(names...)
	e.fail(os.MkdirAll(p, 0o755))
	return p
}

// file writes a file under the run's directory and returns its path.
func (e *env) file(content string, names ...string) string {
	p := e.path(names...)
	e.fail(os.MkdirAll(filepath.Dir(p), 0o755))
	e.fail(os.WriteFile(p, []byte(content), 0o644))
	return p
}

// python returns the real interpreter's canonical path.
func (e *env) python() string {
	p, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		e.skipf("no /usr/bin/python3: %v", err)
		return "/usr/bin/python3"
	}
	return p
}

// py returns the command line running Python code (after the prelude) in isolated
// mode.
func (e *env) py(code string, args ...string) []string {
	return append([]string{e.python(), "-I", "-c", prelude + code}, args...)
}

// prelude defines attempt(label, f), which prints "label OK repr(result)" or
// "label ERRNO" (the errno name, or the exception's type when it has no errno),
// and read(path).
const prelude = `import errno, os, socket, sys
def attempt(label, f):
    try:
        r = f()
    except OSError as e:
        name = errno.errorcode.get(e.errno) if e.errno else None
        print(label, name or type(e).__name__, flush=True)
    else:
        print(label, "OK", repr(r), flush=True)
def read(p):
    with open(p, "rb") as f:
        return f.read().decode(errors="replace")
`

// plan is how one attack runs: the policy, the program, and the check.
type plan struct {
	// rules are policy lines "key=value" (PYSB_MARK is added).
	rules  []string
	limits pysandboxes.Limits
	// argv is the program and its arguments.
	argv []string
	// dir is the working directory ("" is the host's).
	dir string
	// timeout bounds the run (default 20 s).
	timeout time.Duration
	// check judges the run.
	check func(r *runResult) (outcome, string)
	// host, when set, says what the host saw (a file written, a datagram
	// received): through is a breach whatever the program printed; a program that
	// reports success while the host saw nothing is unclear, unless sinkDecides.
	host func() (through bool, detail string)
	// sinkDecides: what the host received decides, whatever the program printed.
	// A datagram sent to a loopback address from a network namespace of the
	// sandbox's own stays there (sendto succeeds, nobody receives it): the
	// security property is that the host's sink, the attack's target, received
	// nothing.
	sinkDecides bool
	// hostControl, when set, checks on the host that the control attempt arrived
	// (the allowed datagram was received): otherwise the run is unclear.
	hostControl func() error
	// ownsTree: the check itself judges the processes left after Wait (otherwise a
	// process of the run left after Wait fails the attack).
	ownsTree bool
	// custom replaces the whole run (the host-death attack).
	custom func() (outcome, string, error)
	// during, when set, runs on the host while the program runs (started once
	// the program is); the run waits for it to return.
	during func()
	// warmVM: under a provider that starts a VM for the sandbox (qemu), the VM
	// is started (kept warm by a program of the same interpreter waiting on its
	// standard input) before the run and its timeout begin, so that the timeout
	// counts the program's time, not the VM's start.
	warmVM bool
}

// vmStartAllowance is added to the timeout of a run that starts a VM (qemu)
// and whose timeout is not the attack itself (those start the VM first:
// warmVM).
const vmStartAllowance = 60 * time.Second

// keepWarm starts a program in sb that keeps its VM running until stop: the
// interpreter interp (Python or a shell) reading its standard input.
func keepWarm(ctx context.Context, sb *pysandboxes.Sandbox, interp string) (stop func(), err error) {
	args := []string{"-c", "while read -r x; do :; done"}
	if strings.HasPrefix(filepath.Base(interp), "python") {
		args = []string{"-I", "-c", "import sys; sys.stdin.read()"}
	}
	keeper := sb.Command(ctx, interp, args...)
	w, err := keeper.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := keeper.Start(); err != nil {
		return nil, err
	}
	return func() { w.Close(); keeper.Wait() }, nil
}

// runResult is what one run gave.
type runResult struct {
	out      []byte // output kept (stdout and stderr)
	total    int64  // bytes written in all
	err      error  // Wait's error
	elapsed  time.Duration
	watchdog bool // the run had to be killed by the corpus's own watchdog
}

// execute sets the attack up and runs it.
func (e *env) execute(a *Attack) (outcome, string, error) {
	pl := a.setup(e)
	if e.skip != "" {
		return outSkipped, e.skip, nil
	}
	if e.err != nil {
		return 0, "", fmt.Errorf("setup: %w", e.err)
	}
	if pl.custom != nil {
		return pl.custom()
	}
	sb, err := e.sandbox(pl.rules, pl.limits)
	if err != nil {
		if rule := refusedRule(pl.rules, err); rule != "" {
			// Fail closed: the provider refuses the rule the attack needs (its
			// control or its target), naming it; nothing runs.
			return outRefused, "the provider refuses the rule the attack needs (" + rule + "): " + err.Error(), nil
		}
		if a.Capability != 0 && !e.provider.Capabilities().Has(a.Capability) {
			// Fail closed: the provider refuses to start a policy it cannot
			// enforce here, even accepted as not enforced.
			return outSkipped, "the provider refuses this policy here (" + a.Capability.String() + " is not declared): " + err.Error(), nil
		}
		if msg := err.Error(); strings.Contains(msg, "network filter") && strings.Contains(msg, "cannot work here") {
			// The attack's control needs traffic out (a net= ALLOW rule), which
			// this provider refuses where its network filter cannot run.
			return outSkipped, "the attack's control needs a net= ALLOW rule, refused here: " + msg, nil
		}
		return 0, "", err
	}
	r, err := e.run(sb, pl)
	if err != nil {
		if errors.Is(err, errStart) && a.Capability != 0 && !e.provider.Capabilities().Has(a.Capability) {
			// Fail closed at the start: the provider refuses what it cannot
			// enforce (an ignore= path it cannot mask).
			return outSkipped, "the provider refuses this policy at the start (" + a.Capability.String() + " is not declared): " + err.Error(), nil
		}
		return 0, "", err
	}
	got, detail := pl.check(r)
	leaked := got != outUnclear && bytes.Contains(r.out, []byte(e.secret))
	if leaked {
		got, detail = outThrough, "the secret appears in the output: "+detail
	}
	if pl.host != nil {
		through, what := pl.host()
		switch {
		case through && got != outThrough:
			got, detail = outThrough, what+" (the program printed: "+detail+")"
		case !through && got == outThrough && pl.sinkDecides && !leaked:
			got, detail = outBlocked, what+": what the program did ("+detail+") stayed in the sandbox (its own network, /tmp or kernel)"
		case !through && got == outThrough:
			got, detail = outUnclear, "the program reports "+detail+" but the host saw nothing ("+what+")"
		}
	}
	if pl.hostControl != nil && got != outUnclear {
		if err := pl.hostControl(); err != nil {
			got, detail = outUnclear, fmt.Sprintf("control: %v (the program printed: %s)", err, detail)
		}
	}
	if !pl.ownsTree {
		if left := killMarked(e.mark); len(left) > 0 {
			return 0, "", fmt.Errorf("processes of the program left running after Wait: %v (killed)", left)
		}
	}
	return got, detail, nil
}

// sandbox makes a sandbox of the run's provider for the rules, accepting as not
// enforced exactly what the policy needs and the provider lacks (everything for
// subprocess, which enforces almost nothing).
func (e *env) sandbox(rules []string, limits pysandboxes.Limits) (*pysandboxes.Sandbox, error) {
	return newSandbox(e.ctx, e.provider, e.mark, e.root, rules, limits)
}

func newSandbox(ctx context.Context, p pysandboxes.Provider, mark, dir string, rules []string, limits pysandboxes.Limits) (*pysandboxes.Sandbox, error) {
	b := policy.NewBuilder().Env(markVar, mark)
	for _, l := range rules {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("bad rule %q", l)
		}
		b.Rule(k, v)
	}
	pol, err := b.Build(ctx, &policy.Options{Dir: dir, Home: dir, Logger: quiet})
	if err != nil {
		return nil, err
	}
	var need pysandboxes.Capability
	for _, r := range driver.Requirements(pol, limits) {
		need |= r.Capability
	}
	accept := need &^ p.Capabilities()
	if p.Name() == "subprocess" {
		accept = pysandboxes.AllCapabilities
	}
	return pysandboxes.New(ctx, pol, pysandboxes.WithProvider(p.Name()), pysandboxes.WithLimits(limits),
		pysandboxes.WithLogger(quiet), pysandboxes.AcceptUnenforced(accept))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// run runs the plan's program.
func (e *env) run(sb *pysandboxes.Sandbox, pl *plan) (*runResult, error) {
	timeout := pl.timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	switch {
	case e.provider.Name() != "qemu":
	case pl.warmVM:
		stop, err := keepWarm(e.ctx, sb, pl.argv[0])
		if err != nil {
			return nil, fmt.Errorf("%w: keeping the VM warm: %w", errStart, err)
		}
		defer stop()
	default:
		// The VM's start (from its saved state, seconds under TCG, far more
		// on a loaded machine) counts against the run's timeout.
		timeout += vmStartAllowance
	}
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	cmd := sb.Command(ctx, pl.argv[0], pl.argv[1:]...)
	cmd.Dir = pl.dir
	out := &boundedBuffer{max: 4 << 20}
	cmd.Stdout, cmd.Stderr = out, out
	r := &runResult{}
	// The corpus's own watchdog, should the sandbox fail to end the program.
	var mu sync.Mutex
	dog := time.AfterFunc(timeout+15*time.Second, func() {
		mu.Lock()
		r.watchdog = true
		mu.Unlock()
		killMarked(e.mark)
	})
	defer dog.Stop()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w", errStart, err)
	}
	duringDone := make(chan struct{})
	if pl.during != nil {
		go func() {
			defer close(duringDone)
			pl.during()
		}()
	} else {
		close(duringDone)
	}
	r.err = cmd.Wait()
	<-duringDone
	r.elapsed = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	r.out, r.total = out.Bytes(), out.Total()
	return r, nil
}

// boundedBuffer keeps the first max bytes written to it and counts them all.
type boundedBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buf)
}

func (b *boundedBuffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// probe is one labelled attempt of a program (a line "label STATUS rest").
type probe struct {
	label string
	// deny are the statuses of a refusal (errno names, exception names).
	deny []string
	// control attempts are allowed by the policy: they must succeed everywhere.
	control bool
	// through are statuses other than OK that show the attempt got past every
	// check (EINVAL from mount: the privilege check passed).
	through []string
	// masked, when set, reports that a successful attempt gave nothing (an
	// ignored file masked by an empty one): a refusal too.
	masked func(rest string) bool
}

// deny builds a probe for label with its refusal statuses.
func deny(label string, statuses ...string) probe { return probe{label: label, deny: statuses} }

// control builds a control probe.
func control(label string) probe { return probe{label: label, control: true} }

// Sets of refusal statuses.
var (
	fsReadDenied  = []string{"EACCES", "ENOENT"}
	fsWriteDenied = []string{"EACCES", "EPERM", "EROFS", "ENOENT"}
	netDenied     = []string{"EACCES", "EPERM", "ECONNREFUSED", "ETIMEDOUT", "TimeoutError", "ENETUNREACH", "EHOSTUNREACH"}
	procDenied    = []string{"EACCES", "EPERM", "ENOENT", "ESRCH"}
)

// probes checks a program that exits 0 and prints one line per probe: blocked when
// every attack probe shows a refusal, through when one succeeded (one open door
// is a way through), unclear when a control attempt failed or an outcome is
// neither.
func probes(ps ...probe) func(r *runResult) (outcome, string) {
	return func(r *runResult) (outcome, string) {
		if r.err != nil {
			return outUnclear, fmt.Sprintf("the program failed: %v: %s", r.err, excerpt(r.out, 600))
		}
		lines := parseLines(r.out)
		var blocked, through []string
		for _, p := range ps {
			l, ok := lines[p.label]
			if !ok {
				return outUnclear, fmt.Sprintf("no result for %q in: %s", p.label, excerpt(r.out, 600))
			}
			switch {
			case p.control:
				if l.status != "OK" {
					return outUnclear, fmt.Sprintf("control %q failed (the policy should allow it): %s %s", p.label, l.status, l.rest)
				}
			case slices.Contains(p.deny, l.status):
				blocked = append(blocked, p.label+" "+l.status)
			case l.status == "OK" && p.masked != nil && p.masked(l.rest):
				blocked = append(blocked, p.label+" masked ("+excerpt([]byte(l.rest), 40)+")")
			case l.status == "OK" || slices.Contains(p.through, l.status):
				through = append(through, strings.TrimSpace(p.label+" "+l.status+" "+excerpt([]byte(l.rest), 80)))
			default:
				return outUnclear, fmt.Sprintf("%q: unexpected %s %s", p.label, l.status, l.rest)
			}
		}
		switch {
		case len(through) == 0:
			return outBlocked, strings.Join(blocked, ", ")
		case len(blocked) == 0:
			return outThrough, strings.Join(through, ", ")
		}
		// One door open is a way through.
		return outThrough, "partly blocked (" + strings.Join(blocked, ", ") + "), partly through (" + strings.Join(through, ", ") + ")"
	}
}

type line struct{ status, rest string }

// parseLines reads "label STATUS rest" lines (the first line of each label wins).
func parseLines(out []byte) map[string]line {
	m := map[string]line{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimSpace(l), " ", 3)
		if len(f) < 2 {
			continue
		}
		if _, seen := m[f[0]]; seen {
			continue
		}
		rest := ""
		if len(f) == 3 {
			rest = f[2]
		}
		m[f[0]] = line{status: f[1], rest: rest}
	}
	return m
}

// excerpt returns at most n bytes of b, on one line.
func excerpt(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = s[:n] + "..."
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

// listenTCP listens on addr ("127.0.0.1:0"), and greets each connection with
// greeting before closing it. It returns the port.
func (e *env) listenTCP(network, addr, greeting string) int {
	port, _ := e.tcpSink(network, addr, greeting)
	return port
}

// tcpSink is listenTCP that also returns the host's view of the listener:
// through once it accepted a connection (the program reached it).
func (e *env) tcpSink(network, addr, greeting string) (int, func() (bool, string)) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(e.ctx, network, addr)
	if err != nil {
		e.fail(err)
		return 0, func() (bool, string) { return false, "" }
	}
	return l.Addr().(*net.TCPAddr).Port, accepted(e.serve(l, greeting))
}

// accepted is the host's view of a listener that the program must not reach.
func accepted(n *atomic.Int64) func() (bool, string) {
	return func() (bool, string) {
		if c := n.Load(); c > 0 {
			return true, fmt.Sprintf("the host's listener accepted %d connections of the program", c)
		}
		return false, "the host's listener accepted no connection"
	}
}

// serve accepts connections on l until close, and returns the number accepted
// (counted before the greeting is sent).
func (e *env) serve(l net.Listener, greeting string) *atomic.Int64 {
	var wg sync.WaitGroup
	n := &atomic.Int64{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
	e.cleanup(func() { l.Close(); wg.Wait() })
	return n
}

// listenUnix listens on a Unix socket (a name starting with "@" is abstract).
func (e *env) listenUnix(name, greeting string) {
	l, err := net.Listen("unix", name)
	if err != nil {
		e.fail(err)
		return
	}
	e.serve(l, greeting)
}

// udpSink receives datagrams.
type udpSink struct {
	pc   net.PacketConn
	mu   sync.Mutex
	data [][]byte
}

// listenUDP listens for datagrams on addr and returns the sink and its port.
func (e *env) listenUDP(addr string) (*udpSink, int) {
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		e.fail(err)
		return &udpSink{}, 0
	}
	return e.sink(pc), pc.LocalAddr().(*net.UDPAddr).Port
}

// sink receives the datagrams of pc until close.
func (e *env) sink(pc net.PacketConn) *udpSink {
	s := &udpSink{pc: pc}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.data = append(s.data, slices.Clone(buf[:n]))
			s.mu.Unlock()
		}
	}()
	e.cleanup(func() { pc.Close(); wg.Wait() })
	return s
}

// received reports whether a datagram holding needle arrived, waiting up to wait.
func (s *udpSink) received(needle string, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		for _, d := range s.data {
			if bytes.Contains(d, []byte(needle)) {
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleeper starts a process outside the sandbox (a child of the host) and returns
// it; close kills it.
func (e *env) sleeper() *exec.Cmd {
	cmd := exec.Command("/bin/sleep", "120")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.fail(err)
		return cmd
	}
	e.cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool { return proctest.Alive(pid) }

// marked lists the live processes whose environment holds PYSB_MARK=mark: the
// processes of one run (the supervisor included), wherever they went. The scan
// is of the host's /proc: the pids are the host's, whatever pid namespace the
// processes are in. A live process whose environment reads empty (it is between
// fork and exec) is read again, so that none is missed.
func marked(mark string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if hasMark(pid, mark) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// hasMark reports whether the environment of pid holds PYSB_MARK=mark.
func hasMark(pid int, mark string) bool {
	needle := []byte(markVar + "=" + mark + "\x00")
	for try := 0; ; try++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && bytes.Contains(b, needle) {
			return true
		}
		if err != nil || len(b) > 0 || try == 20 || !alive(pid) || kernelThread(pid) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// kernelThread reports whether pid is a kernel thread (PF_KTHREAD), whose
// environment is always empty.
func kernelThread(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&0x00200000 != 0
}

// killMarked kills the processes of a run and returns those it found. Each is
// signalled through a pidfd opened before its mark is read again, so a pid that
// another process took meanwhile is never signalled.
func killMarked(mark string) []int {
	left := marked(mark)
	for _, pid := range left {
		if p := openProc(pid, func() bool { return hasMark(pid, mark) }); p != nil {
			p.kill()
			p.close()
		}
	}
	return left
}

// proc is a process held by a pidfd: it stays that process whatever happens to
// its pid.
type proc struct {
	pid, fd int
}

// openProc opens a pidfd on pid, and returns it if member reports, once the
// pidfd is open, that the process is one of the run's while it still runs (so
// what member read was that process's). It returns nil otherwise.
func openProc(pid int, member func() bool) *proc {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	p := &proc{pid: pid, fd: fd}
	if !member() || p.exited() {
		p.close()
		return nil
	}
	return p
}

// exited reports whether the process has ended (a zombie has).
func (p *proc) exited() bool {
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

func (p *proc) kill() { unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0) }

func (p *proc) close() { unix.Close(p.fd) }

// exitError returns the *ExitError in err.
func exitError(err error) *pysandboxes.ExitError {
	var ee *pysandboxes.ExitError
	if errors.As(err, &ee) {
		return ee
	}
	return nil
}
