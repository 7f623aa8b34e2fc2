package pylayer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

// zygoteEntry is a small evaluation module for the zygote's own tests (the eval
// guard proper is tested with the root package): profile {"all": true} gives
// the code every builtin, else only those of profile["call"].
const zygoteEntry = `import builtins as _b
_RAW = dict(_b.__dict__)
_compile, _eval, _exec = compile, eval, exec


class Oops(Exception):
    pass


def run(src, names=None, profile=None, mode='eval', filename='<eval>'):
    if src == 'OOPS':
        raise Oops('bad thing')
    ns = dict(names or {})
    if profile.get('all'):
        ns['__builtins__'] = _RAW
    else:
        ns['__builtins__'] = {k: _RAW[k] for k in profile.get('call', [])}
    code = _compile(src, filename, mode, 0, True)
    if mode == 'eval':
        return _eval(code, ns)
    _exec(code, ns)
    return {k: v for k, v in ns.items() if k != '__builtins__'}


def describe(exc):
    if isinstance(exc, Oops):
        return (__name__, 'Oops', str(exc), [1, 2.5, 'x', {'a': [True, None]}])
    return None
`

type testZygote struct {
	*Zygote
	cmd  *exec.Cmd
	info ZygoteInfo
	out  *syncBuf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startZygote runs a zygote process (without any OS provider: what is tested
// here is the zygote and the Python layer's guard in its processes).
func startZygote(t *testing.T, o ZygoteOptions) *testZygote {
	t.Helper()
	return startZygoteWith(t, o, nil, nil)
}

// startZygoteWith is startZygote with hooks before and after the process starts.
func startZygoteWith(t *testing.T, o ZygoteOptions, before, after func(*exec.Cmd)) *testZygote {
	t.Helper()
	needPython(t)
	ctx := context.Background()
	in, err := ResolveInterpreter(ctx, realPython)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse(ctx, "", []byte("python-import=json\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Modules == nil {
		o.Modules, err = CompileModules(ctx, in, map[string]string{"zyg_test_entry": zygoteEntry})
		if err != nil {
			t.Fatal(err)
		}
		o.Entry = "zyg_test_entry"
	}
	if o.Profiles == nil {
		o.Profiles, err = transport.Pickle(map[string]any{"": map[string]any{"all": true}, "calc": map[string]any{"call": []any{}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := &syncBuf{}
	if o.Stdout == nil {
		o.Stdout, o.Stderr = out, out
	}
	z, err := NewZygote(ctx, ConfigInput{Policy: pol, Interp: in, Mode: ModeEnforce, Provider: "none"}, o)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(in.Path, Command(in, nil, 3)[1:]...)
	cmd.ExtraFiles = []*os.File{z.Session().ChildFile()}
	cmd.Env = []string{}
	cmd.Stdout, cmd.Stderr = out, out
	if before != nil {
		before(cmd)
	}
	if err := cmd.Start(); err != nil {
		z.Session().Abort()
		t.Fatal(err)
	}
	if after != nil {
		after(cmd)
	}
	z.Session().Started(func(error) { cmd.Process.Kill() })
	tz := &testZygote{Zygote: z, cmd: cmd, out: out}
	t.Cleanup(func() { tz.stop(t) })
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tz.info, err = z.Ready(rctx)
	if err != nil {
		t.Fatalf("zygote not ready: %v\n%s", err, out.String())
	}
	return tz
}

func (tz *testZygote) stop(t *testing.T) {
	if tz.cmd == nil {
		return
	}
	tz.CloseWrite()
	done := make(chan error, 1)
	go func() { done <- tz.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		tz.cmd.Process.Kill()
		<-done
		t.Errorf("the zygote did not exit when its channel was closed")
	}
	tz.Session().Finish(2 * time.Second)
	tz.cmd = nil
}

func (tz *testZygote) eval(t *testing.T, req EvalRequest) *EvalReply {
	t.Helper()
	if req.Filename == "" {
		req.Filename = "<eval:test>"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := tz.Eval(ctx, &req, CallOutput{Stdout: tz.out, Stderr: tz.out})
	if err != nil {
		t.Fatalf("Eval(%q): %v\n%s", req.Source, err, tz.out.String())
	}
	return r
}

// value evaluates src (the default profile: every builtin) and decodes the result.
func (tz *testZygote) value(t *testing.T, src string) any {
	t.Helper()
	r := tz.eval(t, EvalRequest{Source: src})
	if r.Result == nil {
		t.Fatalf("Eval(%q): no result: %+v %+v", src, r.Exception, r.Ended)
	}
	v, err := transport.Unpickle(r.Result, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestZygoteEvaluatesInAFreshProcessEachTime: every evaluation runs in a
// process of its own, forked from the zygote: what one does to the interpreter
// (a module attribute, a name) is gone for the next.
func TestZygoteEvaluatesInAFreshProcessEachTime(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Pool: 1})
	if !tz.info.Fork || tz.info.Single {
		t.Fatalf("info = %+v", tz.info)
	}
	if v := tz.value(t, "2+3*4"); v != int64(14) {
		t.Errorf("2+3*4 = %v", v)
	}
	r := tz.eval(t, EvalRequest{Exec: true, Source: "import sys\nsys.SB_MARK = 1\nx = 5\ndef f(): pass\n"})
	v, err := transport.Unpickle(r.Result, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := v.(transport.Dict).StringMap()
	if d["x"] != int64(5) || len(d) != 1 {
		t.Errorf("exec bound %v, want x=5 only (a function and a module cannot travel)", d)
	}
	if v := tz.value(t, "hasattr(__import__('sys'), 'SB_MARK')"); v != false {
		t.Errorf("the mark of the previous evaluation is visible: %v", v)
	}
	r = tz.eval(t, EvalRequest{Source: "x"})
	if r.Exception == nil || r.Exception.Qualname != "NameError" {
		t.Errorf("x after its evaluation ended: %+v", r)
	}
	p1 := tz.value(t, "__import__('os').getpid()")
	p2 := tz.value(t, "__import__('os').getpid()")
	if p1 == p2 || p1 == int64(tz.info.Pid) {
		t.Errorf("pids %v, %v (zygote %d): not one fresh process per evaluation", p1, p2, tz.info.Pid)
	}
	// The names travel in, with their types.
	names, _ := transport.Pickle(map[string]any{"rows": []any{int64(1), "b"}})
	r = tz.eval(t, EvalRequest{Source: "(len(rows), rows[1])", Names: names})
	v, _ = transport.Unpickle(r.Result, nil)
	if !transport.Equal(v, transport.Tuple{int64(2), "b"}) {
		t.Errorf("names: %v", v)
	}
}

// TestZygoteEvaluatedCodeIsRefusedFork: the zygote forks, the evaluated code
// may not: the Python layer's guard, armed in each process, refuses os.fork.
func TestZygoteEvaluatedCodeIsRefusedFork(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true})
	r := tz.eval(t, EvalRequest{Source: "__import__('os').fork()"})
	x := r.Exception
	if x == nil || x.Qualname != "RuleApiPermissionError" || len(x.Denials) == 0 || !strings.Contains(x.Message, "os.fork") {
		t.Fatalf("os.fork in an evaluation: %+v %+v", r.Exception, r.Ended)
	}
	if d, ok := tz.Denial(x.Denials[0]); !ok || d.Kind != "api" || d.Target != "os.fork" {
		t.Errorf("denial %+v, %v", d, ok)
	}
	if !strings.Contains(x.Traceback, `File "<eval:test>"`) || strings.Contains(x.Traceback, "zygote") {
		t.Errorf("traceback (the evaluation's frames only):\n%s", x.Traceback)
	}
	// A file the policy does not expose.
	r = tz.eval(t, EvalRequest{Source: "open('/etc/shadow').read()"})
	if r.Exception == nil || r.Exception.Qualname != "RuleFileNotFoundError" {
		t.Errorf("open: %+v", r.Exception)
	}
	if v := tz.value(t, "1"); v != int64(1) {
		t.Errorf("after refusals: %v", v)
	}
}

// TestZygoteHardLimits: a wall-clock timeout kills an evaluation blocked in C;
// RLIMIT_AS turns a huge allocation into MemoryError; RLIMIT_CPU kills a spin;
// output past the limit kills the process. The zygote survives each, and the
// next evaluation works.
func TestZygoteHardLimits(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true})
	cases := []struct {
		name   string
		req    EvalRequest
		reason string
	}{
		{"timeout", EvalRequest{Source: "sum(range(10**12))", Timeout: 300 * time.Millisecond}, "timeout"},
		{"cpu", EvalRequest{Source: "sum(range(10**12))", CPU: time.Second, Timeout: 30 * time.Second}, "cpu"},
		{"output", EvalRequest{Source: "print('x' * 300000)", Output: 1000}, "output"},
	}
	for _, c := range cases {
		r := tz.eval(t, c.req)
		if r.Ended == nil || r.Ended.Reason != c.reason {
			t.Errorf("%s: %+v %+v", c.name, r.Exception, r.Ended)
		}
		if v := tz.value(t, "6*7"); v != int64(42) {
			t.Errorf("after %s: %v", c.name, v)
		}
	}
	r := tz.eval(t, EvalRequest{Source: "bytes(10**10)", Memory: 512 << 20})
	if x := r.Exception; x == nil || x.Qualname != "MemoryError" || x.Budget != "memory" || x.Limit != 512<<20 {
		t.Errorf("memory: %+v %+v", r.Exception, r.Ended)
	}
	if v := tz.value(t, "len(bytes(10**6))"); v != int64(1000000) {
		t.Errorf("after memory: %v", v)
	}
}

// TestZygoteLimitsSetAhead: once two evaluations in a row have the same
// limits, the processes forked next set them before their request arrives;
// each evaluation still runs under exactly its own limits: the same ones, lower
// ones (lowered at the request), higher ones (the process set ahead cannot
// raise them: it is replaced by a fresh one), and the memory limit set ahead
// turns a huge allocation into MemoryError.
func TestZygoteLimitsSetAhead(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true})
	const probe = "(__import__('resource').getrlimit(__import__('resource').RLIMIT_CPU), " +
		"__import__('resource').getrlimit(__import__('resource').RLIMIT_AS), __import__('os').getpid())"
	check := func(name string, cpu int64, mem int64) int64 {
		t.Helper()
		r := tz.eval(t, EvalRequest{Source: probe, CPU: time.Duration(cpu) * time.Second, Memory: uint64(mem)})
		if r.Result == nil {
			t.Fatalf("%s: no result: %+v %+v", name, r.Exception, r.Ended)
		}
		v, err := transport.Unpickle(r.Result, nil)
		if err != nil {
			t.Fatal(err)
		}
		tu := v.(transport.Tuple)
		want := transport.Tuple{transport.Tuple{cpu, cpu + 1}, transport.Tuple{mem, mem}}
		if !transport.Equal(tu[:2], want) {
			t.Errorf("%s: limits (cpu, as) %v, want %v", name, tu[:2], want)
		}
		return tu[2].(int64)
	}
	const a, big, low = 512 << 20, 1 << 30, 256 << 20
	pids := map[int64]bool{}
	for i := range 4 {
		pids[check("same limits "+strconv.Itoa(i), 5, a)] = true
	}
	pids[check("higher limits", 10, big)] = true
	check("same again", 5, a)
	check("same again", 5, a) // the next process has them set ahead
	pids[check("lower limits", 2, low)] = true
	if len(pids) != 6 {
		t.Errorf("%d distinct processes for 6 evaluations", len(pids))
	}
	check("same again", 5, a)
	check("same again", 5, a)
	r := tz.eval(t, EvalRequest{Source: "len(bytes(600 << 20))", CPU: 5 * time.Second, Memory: a})
	if x := r.Exception; x == nil || x.Qualname != "MemoryError" || x.Budget != "memory" || x.Limit != a {
		t.Errorf("memory under limits set ahead: %+v %+v", r.Exception, r.Ended)
	}
	// No limit at all after limits set ahead: a fresh process without them.
	r = tz.eval(t, EvalRequest{Source: "len(bytes(600 << 20))"})
	if r.Result == nil {
		t.Errorf("no limits after limits set ahead: %+v %+v", r.Exception, r.Ended)
	}
}

// TestZygoteCancel: an evaluation whose context ends is killed (the zygote
// confirms it), and the next one works.
func TestZygoteCancel(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	_, err := tz.Eval(ctx, &EvalRequest{Source: "__import__('time').sleep(60)", Filename: "<eval:x>"}, CallOutput{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCancelUnconfirmed) {
		t.Fatalf("cancelled evaluation: %v", err)
	}
	if v := tz.value(t, "'ok'"); v != "ok" {
		t.Errorf("after cancel: %v", v)
	}
}

// TestZygoteEvaluationHoldsNoChannel: a process reads its request from the
// channel to the host itself when it is the one waiting (and from the zygote
// otherwise), and holds no descriptor of that channel (a socket) once the
// evaluated code runs, whichever way the request came: sequential requests,
// and requests sent at once (the later ones queued by the zygote).
func TestZygoteEvaluationHoldsNoChannel(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Pool: 1})
	src := `import os, stat
socks = []
fds = []
for fd in range(1024):
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        continue
    fds.append(fd)
    if stat.S_ISSOCK(mode):
        socks.append(fd)
`
	check := func(name string, r *EvalReply) {
		t.Helper()
		if r == nil || r.Result == nil {
			t.Fatalf("%s: no result: %+v", name, r)
		}
		v, err := transport.Unpickle(r.Result, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := v.(transport.Dict).StringMap()
		if socks, _ := d["socks"].([]any); len(socks) != 0 {
			t.Errorf("%s: the evaluation holds sockets %v (descriptors %v)", name, socks, d["fds"])
		}
		if fds, _ := d["fds"].([]any); len(fds) < 3 {
			t.Errorf("%s: descriptors %v: the probe saw nothing", name, fds)
		}
	}
	for i := range 3 {
		check("sequential "+strconv.Itoa(i), tz.eval(t, EvalRequest{Exec: true, Source: src}))
	}
	var wg sync.WaitGroup
	reps := make([]*EvalReply, 4)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], _ = tz.Eval(context.Background(), &EvalRequest{Exec: true, Source: src, Filename: "<eval:c>"}, CallOutput{})
		}()
	}
	wg.Wait()
	for i, r := range reps {
		check("at once "+strconv.Itoa(i), r)
	}
}

// TestZygoteCancelReadByAnotherProcess: with a pool of 2, the cancellation of a
// running evaluation reaches the zygote while the other ready process reads
// the channel (it hands the frame back and ends): the evaluation is killed
// and confirmed, the zygote lives on and serves the next one.
func TestZygoteCancelReadByAnotherProcess(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Pool: 2})
	pid := tz.cmd.Process.Pid
	if v := tz.value(t, "1"); v != int64(1) {
		t.Fatal(v)
	}
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(300 * time.Millisecond)
			cancel()
		}()
		_, err := tz.Eval(ctx, &EvalRequest{Source: "__import__('time').sleep(60)", Filename: "<eval:x>"}, CallOutput{})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCancelUnconfirmed) {
			t.Fatalf("cancelled evaluation %d: %v", i, err)
		}
		if v := tz.value(t, "'ok'"); v != "ok" {
			t.Errorf("after cancel %d: %v", i, v)
		}
	}
	if !proctest.Alive(pid) {
		t.Errorf("the zygote (pid %d) ended", pid)
	}
}

// TestZygoteOneProcessorScheduling: on one processor (QEMU's guest has one
// vCPU) the zygote and its processes run under SCHED_BATCH, whatever
// RLIMIT_NICE is (not SCHED_IDLE, under which the zygote got almost nothing of
// a processor another program kept busy); on more processors nothing
// changes. Evaluations work in each case.
func TestZygoteOneProcessorScheduling(t *testing.T) {
	for _, tool := range []string{"taskset", "prlimit"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (util-linux): %v", tool, err)
		}
	}
	const (
		other = 0
		batch = 3
	)
	policy := func(pid int) int {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		n, err := strconv.Atoi(f[38]) // field 41: policy
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wrap := func(prefix ...string) func(*exec.Cmd) {
		return func(c *exec.Cmd) {
			path, _ := exec.LookPath(prefix[0])
			c.Args = append(append([]string{path}, prefix[1:]...), append([]string{c.Path}, c.Args[1:]...)...)
			c.Path = path
		}
	}
	for _, tc := range []struct {
		name          string
		before        func(*exec.Cmd)
		zygote, child int
	}{
		{"one processor, RLIMIT_NICE 20", wrap("prlimit", "--nice=20:20", "taskset", "-c", "0"), batch, batch},
		{"one processor, RLIMIT_NICE 0", wrap("prlimit", "--nice=0:0", "taskset", "-c", "0"), batch, batch},
		{"every processor", nil, other, other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before == nil && runtime.NumCPU() < 2 {
				t.Skip("this machine has one processor")
			}
			if strings.Contains(tc.name, "RLIMIT_NICE 20") && exec.Command("prlimit", "--nice=20:20", "true").Run() != nil {
				t.Skip("RLIMIT_NICE cannot be raised to 20 here (it needs CAP_SYS_RESOURCE)")
			}
			tz := startZygoteWith(t, ZygoteOptions{Guard: true, Pool: 1}, tc.before, nil)
			v := tz.value(t, "(__import__('os').sched_getscheduler(0), __import__('os').getppid())")
			tu, _ := v.(transport.Tuple)
			if len(tu) != 2 {
				t.Fatalf("got %v", v)
			}
			zpid := int(tu[1].(int64))
			if got := int(tu[0].(int64)); got != tc.child {
				t.Errorf("the evaluation's process runs under policy %d, want %d", got, tc.child)
			}
			if got := policy(zpid); got != tc.zygote {
				t.Errorf("the zygote (pid %d) runs under policy %d, want %d", zpid, got, tc.zygote)
			}
		})
	}
}

// TestZygoteGuardExceptionAndOutput: an exception of the entry module comes
// with the arguments its describe() gives; what the code prints arrives tagged
// with its evaluation.
func TestZygoteGuardExceptionAndOutput(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true})
	r := tz.eval(t, EvalRequest{Source: "OOPS"})
	if x := r.Exception; x == nil || x.Qualname != "Oops" || x.Module != "zyg_test_entry" || string(x.Guard) != `[1,2.5,"x",{"a":[true,null]}]` {
		t.Fatalf("guard exception: %+v", r.Exception)
	}
	var out, errb bytes.Buffer
	req := &EvalRequest{Source: "print('hello') or __import__('sys').stderr.write('oops\\n')", Filename: "<eval:p>"}
	rep, err := tz.Eval(context.Background(), req, CallOutput{Stdout: &out, Stderr: &errb})
	if err != nil || rep.Result == nil {
		t.Fatal(err, rep)
	}
	if out.String() != "hello\n" || errb.String() != "oops\n" {
		t.Errorf("output %q, %q", out.String(), errb.String())
	}
	// A profile the zygote does not know, and a value that cannot travel.
	r = tz.eval(t, EvalRequest{Source: "1", Profile: "nope"})
	if r.Exception == nil || r.Exception.Qualname != "ValueError" {
		t.Errorf("unknown profile: %+v", r.Exception)
	}
	r = tz.eval(t, EvalRequest{Source: "lambda: 0"})
	if r.Exception == nil || r.Exception.Kind != "unpicklable" {
		t.Errorf("a function as result: %+v", r.Exception)
	}
	// The restricted profile: no builtin at all.
	r = tz.eval(t, EvalRequest{Source: "len('ab')", Profile: "calc"})
	if r.Exception == nil || r.Exception.Qualname != "NameError" {
		t.Errorf("calc profile: %+v", r.Exception)
	}
}

// TestZygotePoolRunsEvaluationsAtOnce: with a pool of 2, a short evaluation
// sent while a long one runs ends first.
func TestZygotePoolRunsEvaluationsAtOnce(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Pool: 2})
	long := make(chan *EvalReply, 1)
	go func() {
		r, _ := tz.Eval(context.Background(), &EvalRequest{Source: "__import__('time').sleep(2) or 'long'", Filename: "<eval:l>"}, CallOutput{})
		long <- r
	}()
	time.Sleep(300 * time.Millisecond)
	if v := tz.value(t, "'short'"); v != "short" {
		t.Fatalf("short: %v", v)
	}
	select {
	case <-long:
		t.Fatal("the long evaluation ended before the short one: they did not run at once")
	default:
	}
	if r := <-long; r == nil || r.Result == nil {
		t.Errorf("long: %+v", r)
	}
}

// TestZygoteSingleMode: where forking is not used, the process serves one
// evaluation itself, under the guard, and exits.
func TestZygoteSingleMode(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Single: true})
	if !tz.info.Single {
		t.Fatalf("info %+v", tz.info)
	}
	r := tz.eval(t, EvalRequest{Source: "(__import__('os').getpid(), bytes(10**10))", Memory: 512 << 20})
	if r.Exception == nil || r.Exception.Budget != "memory" {
		t.Fatalf("single: %+v %+v", r.Exception, r.Ended)
	}
	done := make(chan error, 1)
	go func() { done <- tz.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("single-mode process: %v", err)
		}
		tz.Session().Finish(time.Second)
		tz.cmd = nil
	case <-time.After(10 * time.Second):
		t.Fatal("the single-mode process did not exit after its evaluation")
	}
}

// TestZygoteReportsWhenForkingFails: a zygote that cannot fork (here: it runs
// as an unprivileged user limited to one process) says so, and why, instead of
// serving; the host then uses fresh processes.
func TestZygoteReportsWhenForkingFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the zygote as another user")
	}
	tz := startZygoteWith(t, ZygoteOptions{Guard: true}, func(cmd *exec.Cmd) {
		// As nobody, limited to one process (the shell, then the interpreter it
		// becomes).
		cmd.Args = append([]string{"sh", "-c", `ulimit -p 1 && exec "$0" "$@"`}, cmd.Args...)
		cmd.Path = "/bin/sh"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}, nil)
	if tz.info.Fork || !strings.Contains(tz.info.Reason, "os.fork()") {
		t.Fatalf("info = %+v", tz.info)
	}
}

// TestZygoteNoProcessLeftAfterClose: closing the channel ends the zygote and
// every process it forked.
func TestZygoteNoProcessLeftAfterClose(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Pool: 2})
	for i := range 20 {
		if v := tz.value(t, "1+1"); v != int64(2) {
			t.Fatalf("eval %d: %v", i, v)
		}
	}
	pid := tz.cmd.Process.Pid
	var kids []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if kids = proctest.Children(pid); len(kids) >= 2 {
			break
		}
	}
	if len(kids) < 2 {
		t.Errorf("the zygote keeps %d processes ready, want 2", len(kids))
	}
	tz.stop(t)
	for _, k := range kids {
		if proctest.Alive(k) {
			t.Errorf("process %d of the zygote is still there", k)
		}
	}
}

// TestZygoteProcessEndsAfterItsAnswer: an evaluation's process waits, once it
// has answered, until the zygote has relayed the answer, then ends; it ends
// even when the evaluated code replaced the descriptor it waits on (a pipe
// it holds open itself), and the next evaluation runs in a fresh process.
func TestZygoteProcessEndsAfterItsAnswer(t *testing.T) {
	tz := startZygote(t, ZygoteOptions{Guard: true, Pool: 1})
	src := `import os
r, w = os.pipe()
swapped = []
for fd in range(3, 256):
    if fd in (r, w):
        continue
    try:
        os.read(fd, 0)  # a read end: the pipe from the zygote
    except OSError:
        continue
    os.dup2(r, fd)
    swapped.append(fd)
pid = os.getpid()
`
	r := tz.eval(t, EvalRequest{Exec: true, Source: src})
	if r.Result == nil {
		t.Fatalf("no result: %+v %+v", r.Exception, r.Ended)
	}
	v, err := transport.Unpickle(r.Result, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := v.(transport.Dict).StringMap()
	pid, _ := d["pid"].(int64)
	if sw, _ := d["swapped"].([]any); pid == 0 || len(sw) == 0 {
		t.Fatalf("the evaluation did not replace the descriptor it waits on: %v", d)
	}
	gone := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !proctest.Alive(int(pid)) {
			gone = true
			break
		}
	}
	if !gone {
		t.Errorf("the process of an answered evaluation (pid %d) is still there", pid)
	}
	if p2 := tz.value(t, "__import__('os').getpid()"); p2 == pid {
		t.Errorf("the next evaluation ran in the same process %d", pid)
	}
}

// TestZygoteHandlerRefusesWhatBreaksTheProtocol: frames out of protocol are
// errors (the session then kills the zygote).
func TestZygoteHandlerRefusesWhatBreaksTheProtocol(t *testing.T) {
	s := &Session{seen: map[string]bool{}, done: make(chan struct{})}
	s.obs.init()
	z := &Zygote{s: s, ready: make(chan struct{}), calls: map[uint64]*zcall{}, abandoned: map[uint64]bool{}}
	var sink bytes.Buffer
	z.w = transport.NewWriter(&sink, maxHostFrame)
	bad := []struct {
		name string
		f    transport.Frame
	}{
		{"unknown kind", transport.Frame{Kind: 99, Payload: []byte("x")}},
		{"no id", transport.Frame{Kind: kindEvalResult, Payload: []byte("1234")}},
		{"result of no evaluation", frame(kindEvalResult, 7, "\x80\x05N.")},
		{"result for id 0", frame(kindEvalResult, 0, "\x80\x05N.")},
		{"malformed ready", transport.Frame{Kind: kindZReady, Payload: []byte("{")}},
		{"ready with unknown fields", transport.Frame{Kind: kindZReady, Payload: []byte(`{"pid":1,"x":2}`)}},
	}
	for _, b := range bad {
		if err := z.handle(b.f); err == nil {
			t.Errorf("%s: accepted", b.name)
		}
	}
	c := &zcall{done: make(chan *EvalReply, 1), out: CallOutput{Limit: 3, LimitErr: errors.New("limit")}}
	z.calls[5] = c
	if err := z.handle(frame(kindEvalExc, 5, `{"module":`)); err == nil {
		t.Error("a malformed exception descriptor was accepted")
	}
	if err := z.handle(frame(kindEvalExc, 5, `{"module":"m","extra":1}`)); err == nil {
		t.Error("an exception descriptor with unknown fields was accepted")
	}
	if err := z.handle(frame(kindEvalEnded, 5, `{"reason":"timeout","signal":9,"status":0,"cpu":0.5,"detail":""}`)); err != nil {
		t.Fatal(err)
	}
	if r := <-c.done; r.Ended == nil || r.Ended.Reason != "timeout" {
		t.Errorf("end %+v", r)
	}
	if err := z.handle(frame(kindEvalResult, 5, "\x80\x05N.")); err == nil {
		t.Error("a second end was accepted")
	}
	// Output past the limit: the zygote is asked to kill it, the rest dropped.
	c = &zcall{done: make(chan *EvalReply, 1), out: CallOutput{Limit: 3, LimitErr: errors.New("limit")}}
	z.calls[6] = c
	if err := z.handle(frame(kindEvalStdout, 6, "abcd")); err != nil {
		t.Fatal(err)
	}
	if r := <-c.done; r != nil {
		t.Errorf("over the limit: %+v", r)
	}
	if !bytes.Contains(sink.Bytes(), []byte{0, 0, 0, 9, kindCancel, 0, 0, 0, 0, 0, 0, 0, 6}) {
		t.Errorf("no cancel frame for evaluation 6: %q", sink.Bytes())
	}
	z.abandon(6)
	if err := z.handle(frame(kindEvalEnded, 6, `{"reason":"cancel","signal":9,"status":0,"cpu":0,"detail":""}`)); err != nil {
		t.Errorf("the end of an abandoned evaluation: %v", err)
	}
}

// TestZygoteEncodeBounds: an evaluation over the frame bound is refused before
// anything is sent.
func TestZygoteEncodeBounds(t *testing.T) {
	z := &Zygote{}
	if _, err := z.encode(&EvalRequest{Source: strings.Repeat("x", maxHostFrame)}); err == nil {
		t.Error("a source over the frame bound was accepted")
	}
	b, err := z.encode(&EvalRequest{Source: "1", Profile: "p", Timeout: 1500 * time.Microsecond, CPU: 1001 * time.Millisecond, Memory: 7, Output: 9, Exec: true})
	if err != nil {
		t.Fatal(err)
	}
	if binary.BigEndian.Uint32(b[8:]) != 2 || binary.BigEndian.Uint32(b[12:]) != 2 || binary.BigEndian.Uint64(b[16:]) != 7 || b[32] != 1 {
		t.Errorf("header %v", b[:evalHead])
	}
}

// TestZygoteModuleIsEmbedded: the zygote ships with the layer's modules, and
// boot starts it.
func TestZygoteModuleIsEmbedded(t *testing.T) {
	srcs, _ := moduleSources()
	if !strings.Contains(srcs["zygote"], "def main(") || !strings.Contains(srcs["boot"], "kind == 'zygote'") {
		t.Error("the zygote module is not embedded, or boot does not start it")
	}
}
