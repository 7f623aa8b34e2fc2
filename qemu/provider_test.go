package qemu_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/qemu"
)

const python = "/usr/bin/python3"

// The VM tests share one sandbox, kept warm by a program that waits for its
// standard input to end (a sandbox keeps its VM while a program runs in it):
// every test command runs in that one VM.
var shared struct {
	once   sync.Once
	skip   string
	err    error
	sb     *pysandboxes.Sandbox
	dir    string // the test's tree: ro/, rw/, secret/
	keeper io.WriteCloser
	done   chan error
	// log is the sandbox's debug log.
	log *syncBuffer
}

// syncBuffer is a buffer for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// debugLogger returns a logger of debug level writing to a new buffer.
func debugLogger() (*slog.Logger, *syncBuffer) {
	b := &syncBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.keeper != nil {
		shared.keeper.Close()
		<-shared.done
	}
	if shared.sb != nil {
		shared.sb.Close() // the workers of Call and Eval, and their VM
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// requireQEMU skips the test when the provider cannot run here.
func requireQEMU(t *testing.T) {
	t.Helper()
	p, ok := pysandboxes.Lookup(qemu.Name)
	if !ok {
		t.Fatal("the qemu provider is not registered")
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Skipf("the qemu provider cannot run here: %v", err)
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is missing", python)
	}
}

// writePolicy writes a policy file in dir and loads it.
func writePolicy(t *testing.T, dir string, lines ...string) (*policy.Policy, string) {
	t.Helper()
	path := filepath.Join(dir, ".py-sandboxes")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("loading the policy: %v", err)
	}
	return pol, path
}

func sandbox(t *testing.T) (*pysandboxes.Sandbox, string) {
	t.Helper()
	requireQEMU(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "pysb-qemu-test-")
		if err != nil {
			shared.err = err
			return
		}
		dir, _ = filepath.EvalSymlinks(dir)
		shared.dir = dir
		for _, d := range []string{"ro", "rw", "secret"} {
			os.Mkdir(filepath.Join(dir, d), 0o755)
		}
		os.WriteFile(filepath.Join(dir, "ro", "data.txt"), []byte("shared data"), 0o644)
		os.WriteFile(filepath.Join(dir, "ro", ".env"), []byte("TOKEN=hunter2"), 0o644)
		os.WriteFile(filepath.Join(dir, "secret", "key"), []byte("not shared"), 0o644)
		path := filepath.Join(dir, ".py-sandboxes")
		os.WriteFile(path, []byte(fmt.Sprintf("env=FOO=bar\nexpose-ro=%s/ro\nexpose-rw=%s/rw\nignore=.env\neval-syntax=arith\n", dir, dir)), 0o644)
		pol, err := policy.Load(context.Background(), path, nil)
		if err != nil {
			shared.err = err
			return
		}
		// ignore=: as root QEMU reads ro/ and rw/ through the filter (every
		// test of this VM goes through it); unprivileged the guest masks what
		// they hold when the VM starts, and hide is accepted as not enforced
		// (TestIgnoreNeedsAcceptance).
		logger, log := debugLogger()
		shared.log = log
		sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name), pysandboxes.AcceptUnenforced(pysandboxes.CapHide), pysandboxes.WithLogger(logger))
		if err != nil {
			shared.err = err
			return
		}
		shared.sb = sb
		keeper := sb.Command(context.Background(), python, "-c", "import sys; sys.stdin.read()")
		w, err := keeper.StdinPipe()
		if err != nil {
			shared.err = err
			return
		}
		if err := keeper.Start(); err != nil {
			shared.err = fmt.Errorf("starting the VM: %w", err)
			return
		}
		shared.keeper = w
		shared.done = make(chan error, 1)
		go func() { shared.done <- keeper.Wait() }()
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.sb, shared.dir
}

// keepVM starts a program in sb that keeps its VM up (a sandbox keeps its VM
// while a program runs in it) and returns what ends it, asserting that it
// ended well.
func keepVM(t *testing.T, sb *pysandboxes.Sandbox) (release func()) {
	t.Helper()
	keeper := sb.Command(context.Background(), python, "-c", "import sys; sys.stdin.read()")
	w, err := keeper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := keeper.Start(); err != nil {
		t.Fatal(err)
	}
	return func() {
		w.Close()
		if err := keeper.Wait(); err != nil {
			t.Errorf("the program that kept the VM: %v", err)
		}
	}
}

// py runs code in the shared VM and returns its output and error.
func py(t *testing.T, ctx context.Context, stdin string, code string) (string, string, error) {
	t.Helper()
	sb, dir := sandbox(t)
	cmd := sb.Command(ctx, python, "-c", code)
	cmd.Dir = filepath.Join(dir, "rw")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestStdioEnvAndStatus(t *testing.T) {
	out, errOut, err := py(t, context.Background(), "from the host\n", `
import os, sys
print(sorted(os.environ.items()))
print(sys.stdin.read().strip())
print(os.getcwd())
sys.stderr.write("to stderr\n")
sys.exit(3)`)
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("want exit status 3, got %v (stderr %q)", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("output: %q", out)
	}
	if lines[0] != "[('FOO', 'bar')]" {
		t.Errorf("the environment is not exactly the policy's: %s", lines[0])
	}
	if lines[1] != "from the host" {
		t.Errorf("stdin not relayed: %q", lines[1])
	}
	if lines[2] != filepath.Join(shared.dir, "rw") {
		t.Errorf("working directory %q", lines[2])
	}
	if errOut != "to stderr\n" {
		t.Errorf("stderr %q", errOut)
	}
}

func TestFiles(t *testing.T) {
	_, dir := sandbox(t)
	code := fmt.Sprintf(`
import errno, os
def try_(what, f):
    try:
        f()
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
try_("read-ro", lambda: open(%[1]q + "/ro/data.txt").read())
try_("write-ro", lambda: open(%[1]q + "/ro/new.txt", "w"))
try_("chmod-ro", lambda: os.chmod(%[1]q + "/ro/data.txt", 0o777))
try_("write-rw", lambda: open(%[1]q + "/rw/out.txt", "w").write("from the guest"))
try_("setuid-rw", lambda: (open(%[1]q + "/rw/suid", "w").close(), os.chmod(%[1]q + "/rw/suid", 0o6755)))
try_("ignored", lambda: open(%[1]q + "/ro/.env").read())
try_("outside", lambda: os.stat(%[1]q + "/secret/key"))
try_("list-parent", lambda: os.listdir(%[1]q))
try_("host-home", lambda: os.listdir("/root"))
try_("host-work", lambda: os.stat("/work"))
try_("write-usr", lambda: open("/usr/bin/evil", "w"))
try_("write-root", lambda: open("/evil", "w"))
`, dir)
	out, errOut, err := py(t, context.Background(), "", code)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := map[string]string{
		"read-ro": "ok", "write-ro": "EROFS", "chmod-ro": "EROFS", "write-rw": "ok", "ignored": "ENOENT|EACCES",
		"outside": "ENOENT", "list-parent": "ok", "host-home": "ENOENT", "host-work": "ENOENT", "write-usr": "EROFS",
		"write-root": "EROFS", "setuid-rw": "ok",
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	for k, w := range want {
		if !strings.Contains("|"+w+"|", "|"+got[k]+"|") {
			t.Errorf("%s: got %q, want %s", k, got[k], w)
		}
	}
	// The guest's chmod reaches no host inode: no setuid file appears on the
	// host (root in the guest must not reach the host).
	if st, err := os.Stat(filepath.Join(dir, "rw", "suid")); err != nil {
		t.Errorf("the guest's file on the host: %v", err)
	} else if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("the guest made a set-id file on the host: %v", st.Mode())
	}
	b, err := os.ReadFile(filepath.Join(dir, "rw", "out.txt"))
	if err != nil || string(b) != "from the guest" {
		t.Errorf("the rw share's file on the host: %q, %v", b, err)
	}
}

// TestNoPrivileges: the program runs as root of the guest with no capability
// at all, and cannot get one back.
func TestNoPrivileges(t *testing.T) {
	out, errOut, err := py(t, context.Background(), "", `
import ctypes, errno, os
caps = {l.split(":")[0]: l.split()[1] for l in open("/proc/self/status") if l.startswith("Cap")}
print(caps["CapEff"], caps["CapPrm"], caps["CapBnd"], caps["CapAmb"])
print([l.split()[1] for l in open("/proc/self/status") if l.startswith("NoNewPrivs")][0])
libc = ctypes.CDLL(None, use_errno=True)
r = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
print(r, errno.errorcode.get(ctypes.get_errno()))
print(sorted(os.listdir("/proc"))[:0], len([p for p in os.listdir("/proc") if p.isdigit()]))
`)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("output %q", out)
	}
	if lines[0] != "0000000000000000 0000000000000000 0000000000000000 0000000000000000" {
		t.Errorf("capabilities (eff prm bnd amb): %s", lines[0])
	}
	if lines[1] != "1" {
		t.Errorf("no_new_privs: %s", lines[1])
	}
	if lines[2] != "-1 EPERM" {
		t.Errorf("mount: %s, want -1 EPERM", lines[2])
	}
	// pid namespace: stage 2 (pid 1) and the program.
	if lines[3] != "[] 2" {
		t.Errorf("processes seen: %s", lines[3])
	}
}

// TestSchedulingRights: a program in the guest has RLIMIT_NICE 20: it may
// put a process of its own under SCHED_IDLE and bring it back to SCHED_BATCH
// or SCHED_OTHER at nice 0, and never above nice 0 or to a real-time policy.
func TestSchedulingRights(t *testing.T) {
	out, errOut, err := py(t, context.Background(), "", `
import os, resource
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return e.strerror
print(resource.getrlimit(resource.RLIMIT_NICE))
print(attempt(lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))), os.sched_getscheduler(0))
print(attempt(lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))), os.sched_getscheduler(0))
print(attempt(lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))), os.sched_getscheduler(0))
print(attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, -1)), os.getpriority(os.PRIO_PROCESS, 0))
print(attempt(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))), os.sched_getscheduler(0))
`)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	want := "(20, 20)\nok 5\nok 3\nok 0\nPermission denied 0\nOperation not permitted 0\n"
	if out != want {
		t.Errorf("output\n%s\nwant\n%s", out, want)
	}
}

// TestNoNetwork: without net= rules the VM has no network device, only its
// own loopback.
func TestNoNetwork(t *testing.T) {
	out, errOut, err := py(t, context.Background(), "", `
import errno, socket
print([n for _, n in socket.if_nameindex()])
for addr in [("10.0.2.2", 80), ("1.1.1.1", 53)]:
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect(addr)
        print("connected")
    except OSError as e:
        print(errno.errorcode.get(e.errno, e))
# The guest's own loopback is up.
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen()
c = socket.create_connection(l.getsockname(), timeout=5)
a, _ = l.accept()
a.sendall(b"loopback")
print(c.recv(100).decode())
`)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || strings.Contains(lines[0], "eth") || strings.Contains(lines[0], "en") || lines[3] != "loopback" {
		t.Fatalf("interfaces / connects / loopback: %q", out)
	}
	for _, l := range lines[1:3] {
		if l != "ENETUNREACH" {
			t.Errorf("connect: %s, want ENETUNREACH", l)
		}
	}
}

// TestTimeoutKills: the context's end kills the program in the guest, and
// the VM goes on serving the sandbox.
func TestTimeoutKills(t *testing.T) {
	sandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, errOut, err := py(t, ctx, "", "import time; print('started', flush=True); time.sleep(600)")
	if err == nil {
		t.Fatalf("a program past its deadline ended well (stderr %q)", errOut)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		var ee *pysandboxes.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("want the deadline or a kill, got %v", err)
		}
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the kill took %s", d)
	}
	out, _, err := py(t, context.Background(), "", "print('still here')")
	if err != nil || out != "still here\n" {
		t.Fatalf("the VM after a kill: %q, %v", out, err)
	}
}

// TestParamsChecked: qemu.* parameters are checked against the provider's
// table; a bad one is refused, naming its rule and file(line).
func TestParamsChecked(t *testing.T) {
	requireQEMU(t)
	for _, tc := range []struct{ line, want string }{
		{"qemu.memory=12M", "qemu.memory: 12 MiB is outside 64M..64G"},
		{"qemu.memory=lots", `qemu.memory: "lots" is not a size`},
		{"qemu.cpus=99", `qemu.cpus: "99" is not a number from 1 to 16`},
		{"qemu.snapshot=maybe", `qemu.snapshot: "maybe" is not on or off`},
		{"qemu.cgroup=maybe", `qemu.cgroup: "maybe" is not auto or on`},
		{"qemu.disk=1G", "unknown parameter qemu.disk"},
	} {
		dir := t.TempDir()
		pol, path := writePolicy(t, dir, "env=A=1", tc.line)
		_, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
		if err == nil {
			t.Errorf("%s: accepted", tc.line)
			continue
		}
		for _, w := range []string{path + "(2)", tc.line, tc.want} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error %q does not say %q", tc.line, err, w)
			}
		}
	}
	// Good ones pass.
	pol, _ := writePolicy(t, t.TempDir(), "qemu.memory=1G", "qemu.cpus=2", "qemu.kvm=off", "qemu.start-timeout=90s")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	if err != nil {
		t.Fatalf("good parameters refused: %v", err)
	}
	sb.Close()
}

// ignore= is enforced (hide claimed) where QEMU can read the exposed
// directories through the filter, and refused elsewhere unless the caller
// accepts it.
func TestIgnoreNeedsAcceptance(t *testing.T) {
	requireQEMU(t)
	dir := t.TempDir()
	pol, path := writePolicy(t, dir, "expose-ro="+dir, "ignore=.env")
	p, _ := pysandboxes.Lookup(qemu.Name)
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	why := hideview.Available()
	if why == nil {
		t.Log("the filter works here: hide is claimed")
		if err != nil {
			t.Fatalf("a policy with ignore= where the filter works: %v", err)
		}
		sb.Close()
		if !p.Capabilities().Has(pysandboxes.CapHide) {
			t.Error("the filter works here and hide is not claimed")
		}
		return
	}
	t.Logf("the filter does not work here (%v): ignore= needs acceptance", why)
	if p.Capabilities().Has(pysandboxes.CapHide) {
		t.Error("hide is claimed without the filter")
	}
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) {
		t.Fatalf("want an UnenforcedError, got %v", err)
	}
	if !strings.Contains(err.Error(), path+"(2)") {
		t.Errorf("the error does not name the ignore= rule: %v", err)
	}
}

// TestPython: Sandbox.Python runs the interpreter in the VM under the Python
// layer too: an import the policy does not grant is refused by the guard,
// naming the rule to add.
func TestPython(t *testing.T) {
	sb, dir := sandbox(t)
	cmd := sb.Python(context.Background(), "-c", "print(6 * 7, flush=True)\nimport os")
	cmd.Dir = filepath.Join(dir, "rw")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit status 1, got %v: %s%s", err, out.String(), errb.String())
	}
	if out.String() != "42\n" {
		t.Errorf("output %q", out.String())
	}
	for _, w := range []string{"RuleModuleNotFoundError", "python-import=os"} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("the refusal does not say %q: %s", w, errb.String())
		}
	}
}

// TestCallAndEval: the worker of Call and the eval zygote run in the VM and
// speak to the host over the relayed channel; each call is a round trip in
// the running VM.
func TestCallAndEval(t *testing.T) {
	sb, _ := sandbox(t)
	ctx := context.Background()
	for i := range 3 {
		v, err := sb.Call(ctx, "platform:release")
		if err != nil {
			t.Fatalf("Call %d: %v", i, err)
		}
		if s, _ := v.(string); s == "" || s == hostRelease(t) {
			t.Errorf("Call %d: platform.release() = %v: not the guest's kernel", i, v)
		}
	}
	for i := range 3 {
		v, err := sb.Eval(ctx, "x * 2 + 1", map[string]any{"x": int64(20 + i)})
		if err != nil {
			t.Fatalf("Eval %d: %v", i, err)
		}
		if v != int64(41+2*i) {
			t.Errorf("Eval %d: %v (%T)", i, v, v)
		}
	}
	// The eval zygote reads and writes its channel itself, on its VM's own
	// port (not relayed by the guest's init).
	if !strings.Contains(shared.log.String(), "the channel on the VM's own port") {
		t.Errorf("the eval zygote's channel is not on its VM's own port:\n%s", shared.log.String())
	}
}

// TestEvalBesideBusyProgram: evaluations are answered while another program
// of the same VM keeps the guest's one vCPU busy, not after it. The busy
// program counts to a fixed number, tens of times the work of the
// evaluations, and says "done": every evaluation must be answered before.
// (The eval zygote under SCHED_IDLE got 3/1027 of the vCPU there, and each
// evaluation spaced from the last took 6-8 s.)
func TestEvalBesideBusyProgram(t *testing.T) {
	requireQEMU(t)
	pol, _ := writePolicy(t, t.TempDir(), "eval-syntax=arith")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := len(qemuChildren())
	if _, err := sb.Eval(ctx, "1 + 1", nil); err != nil { // the VM and the zygote up
		t.Fatal(err)
	}
	busy := sb.Python(ctx, "-c", "print('busy', flush=True)\nfor i in range(40_000_000): pass\nprint('done', flush=True)")
	out, err := busy.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb syncBuffer
	busy.Stderr = &errb
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = busy.Wait()
	}()
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := <-lines; l != "busy" {
		t.Fatalf("the busy program said %q: %s", l, errb.String())
	}
	if n := len(qemuChildren()) - before; n != 1 {
		t.Fatalf("%d VMs for the zygote and the busy program, want 1 (the test needs them to share a vCPU)", n)
	}
	for i := range 5 {
		// Spaced: the zygote has prepared the next process by then (under
		// SCHED_IDLE it had not, and read the request itself).
		time.Sleep(300 * time.Millisecond)
		v, err := sb.Eval(ctx, "x * 3", map[string]any{"x": int64(i)})
		if err != nil {
			t.Fatalf("Eval %d: %v", i, err)
		}
		if v != int64(3*i) {
			t.Errorf("Eval %d: %v (%T)", i, v, v)
		}
	}
	select {
	case l, ok := <-lines:
		t.Fatalf("the busy program ended (%q, %v) before the evaluations were answered: they waited for its vCPU", l, ok)
	default:
	}
}

func hostRelease(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// signalProgram handles (or ignores) the signal argv[2], says "ready" on both
// streams (the one the host waits on last) and sleeps. Its handler writes "got
// N" on both streams and exits with status 7 (after, with children, the
// signals pending for its child). argv[1] is handle, ignore (the signal is
// ignored, SIGUSR2 handled) or children (a child that blocks the signal);
// argv[4] the RLIMIT_NOFILE it must have, or "-". It runs under SCHED_OTHER
// (the guest's init does not).
const signalProgram = `
import os, resource, signal, sys, time
mode, sig, sync, nofile = sys.argv[1], signal.Signals(int(sys.argv[2])), sys.argv[3], sys.argv[4]
if nofile != "-" and resource.getrlimit(resource.RLIMIT_NOFILE)[0] != int(nofile):
    print("nofile", resource.getrlimit(resource.RLIMIT_NOFILE), flush=True)
    sys.exit(9)
if os.sched_getscheduler(0) != os.SCHED_OTHER:
    print("policy", os.sched_getscheduler(0), flush=True)
    sys.exit(9)
child = None
def handler(s, f):
    if child:
        st = dict(l.split(":") for l in open("/proc/%d/status" % child))
        print("child pending", st["SigPnd"].strip(), st["ShdPnd"].strip(), flush=True)
    for st in (sys.stdout, sys.stderr):
        print("got", s, file=st, flush=True)
    sys.exit(7)
if mode == "ignore":
    signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, handler)
else:
    signal.signal(sig, handler)
if mode == "children":
    signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
    child = os.fork()
    if child == 0:
        time.sleep(120)
        os._exit(0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
streams = [sys.stderr, sys.stdout] if sync == "stdout" else [sys.stdout, sys.stderr]
for st in streams:
    print("ready", file=st, flush=True)
time.sleep(120)
sys.exit(3)
`

// signalCase is one run of signalProgram.
type signalCase struct {
	name string
	mode string
	sig  syscall.Signal
	// send: the signals the host sends, in order; viaHost: with kill(2) to
	// the process that stands for the program on the host (Cmd.Pid), not
	// Cmd.Signal.
	send    []syscall.Signal
	viaHost bool
	// stdout, stderr: nil, buffer, file or pipe (one at least a pipe: the
	// host waits for "ready" there).
	stdout, stderr string
}

// runSignalCase runs c in sb and checks the program's end and output: for a
// handled signal, the handler's output on both streams and exit status 7;
// for SIGKILL, the signal in the ExitError.
func runSignalCase(t *testing.T, sb *pysandboxes.Sandbox, c signalCase, nofile string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	syncName, syncIdx := "stdout", 0
	if c.stdout != "pipe" {
		syncName, syncIdx = "stderr", 1
	}
	cmd := sb.Command(ctx, python, "-c", signalProgram, c.mode, fmt.Sprint(int(c.sig)), syncName, nofile)
	kinds := [2]string{c.stdout, c.stderr}
	var got [2]func() string
	var readers sync.WaitGroup
	var syncR *bufio.Reader
	for i, kind := range kinds {
		set := func(w io.Writer) {
			if i == 0 {
				cmd.Stdout = w
			} else {
				cmd.Stderr = w
			}
		}
		switch kind {
		case "nil":
		case "buffer":
			b := &bytes.Buffer{}
			set(b)
			got[i] = b.String
		case "file":
			f, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			set(f)
			got[i] = func() string { b, _ := os.ReadFile(f.Name()); return string(b) }
		case "pipe":
			pipe := cmd.StdoutPipe
			if i == 1 {
				pipe = cmd.StderrPipe
			}
			r, err := pipe()
			if err != nil {
				t.Fatal(err)
			}
			if i == syncIdx {
				syncR = bufio.NewReader(r)
				continue
			}
			b := &bytes.Buffer{}
			readers.Add(1)
			go func() {
				defer readers.Done()
				io.Copy(b, r)
			}()
			got[i] = b.String
		default:
			t.Fatalf("stream kind %q", kind)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var prefix string
	for !strings.HasSuffix(prefix, "ready\n") {
		l, err := syncR.ReadString('\n')
		prefix += l
		if err != nil {
			cmd.Terminate()
			readers.Wait()
			cmd.Wait()
			t.Fatalf("the program did not get ready: %q, %v", prefix, err)
		}
	}
	for _, s := range c.send {
		var err error
		if c.viaHost {
			err = syscall.Kill(cmd.Pid(), s)
		} else {
			err = cmd.Signal(s)
		}
		if err != nil {
			t.Errorf("sending %v: %v", s, err)
		}
	}
	rest, _ := io.ReadAll(syncR)
	readers.Wait()
	err := cmd.Wait()
	syncOut := prefix + string(rest)
	got[syncIdx] = func() string { return syncOut }

	want := [2]string{"ready\n", "ready\n"}
	last := c.send[len(c.send)-1]
	var ee *pysandboxes.ExitError
	if last == syscall.SIGKILL {
		if !errors.As(err, &ee) || !ee.Status.Signaled() || ee.Status.Signal() != syscall.SIGKILL || ee.Err != nil {
			t.Errorf("after SIGKILL: %v, want the program killed by SIGKILL", err)
		}
	} else {
		if !errors.As(err, &ee) || ee.Status.Signaled() || ee.ExitCode() != 7 || ee.Err != nil {
			t.Errorf("after %v: %v, want exit status 7 (the handler's)", c.send, err)
		}
		if c.mode == "children" {
			// The child blocks the signal: had it been sent to it too (to the
			// process group), it would be pending there.
			want[0] += "child pending 0000000000000000 0000000000000000\n"
		}
		for i := range want {
			want[i] += fmt.Sprintf("got %d\n", int(last))
		}
	}
	for i, kind := range kinds {
		if got[i] == nil {
			continue
		}
		if g := got[i](); g != want[i] {
			t.Errorf("%s (%s): %q, want %q", []string{"stdout", "stderr"}[i], kind, g, want[i])
		}
	}
}

// TestSignalForwarded: a signal sent to the Cmd (or to the process that stands
// for the program on the host) reaches the program in the guest, and only the
// program, whatever its standard streams are: a handled signal runs the
// handler, whose output arrives and whose exit status is the program's; an
// ignored signal is ignored; SIGKILL kills. The VM goes on serving the
// sandbox.
func TestSignalForwarded(t *testing.T) {
	sb, _ := sandbox(t)
	for _, c := range []signalCase{
		{name: "SIGTERM", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGTERM}, stdout: "pipe", stderr: "nil"},
		{name: "SIGINT", mode: "handle", sig: syscall.SIGINT, send: []syscall.Signal{syscall.SIGINT}, stdout: "pipe", stderr: "buffer"},
		{name: "SIGUSR1", mode: "handle", sig: syscall.SIGUSR1, send: []syscall.Signal{syscall.SIGUSR1}, stdout: "pipe", stderr: "file"},
		{name: "SIGHUP", mode: "handle", sig: syscall.SIGHUP, send: []syscall.Signal{syscall.SIGHUP}, stdout: "nil", stderr: "pipe"},
		{name: "SIGTERM-stdout-buffer", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGTERM}, stdout: "buffer", stderr: "pipe"},
		{name: "SIGINT-stdout-file", mode: "handle", sig: syscall.SIGINT, send: []syscall.Signal{syscall.SIGINT}, stdout: "file", stderr: "pipe"},
		{name: "ignored", mode: "ignore", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR2}, stdout: "pipe", stderr: "pipe"},
		{name: "children", mode: "children", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGTERM}, stdout: "pipe", stderr: "nil"},
		{name: "SIGKILL", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGKILL}, stdout: "pipe", stderr: "nil"},
		{name: "host-SIGTERM", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGTERM}, viaHost: true, stdout: "pipe", stderr: "buffer"},
		{name: "host-SIGKILL", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGKILL}, viaHost: true, stdout: "pipe", stderr: "nil"},
	} {
		t.Run(c.name, func(t *testing.T) { runSignalCase(t, sb, c, "-") })
	}
	// The VM went on: the program that keeps it is still there.
	select {
	case err := <-shared.done:
		shared.done <- err
		t.Fatalf("the VM's other program ended: %v", err)
	default:
	}
}

// TestSignalForwardedWithLimits: the same with resource limits, which stage 2
// applies to the program stopped at its exec (ptrace) before it runs.
func TestSignalForwardedWithLimits(t *testing.T) {
	requireQEMU(t)
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name), pysandboxes.WithLimits(pysandboxes.Limits{OpenFiles: 200}))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// A program keeps the VM: the cases run in it.
	defer keepVM(t, sb)()
	for _, c := range []signalCase{
		{name: "SIGTERM", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGTERM}, stdout: "pipe", stderr: "nil"},
		{name: "ignored", mode: "ignore", sig: syscall.SIGINT, send: []syscall.Signal{syscall.SIGINT, syscall.SIGUSR2}, stdout: "pipe", stderr: "buffer"},
		{name: "SIGKILL", mode: "handle", sig: syscall.SIGTERM, send: []syscall.Signal{syscall.SIGKILL}, stdout: "nil", stderr: "pipe"},
	} {
		t.Run(c.name, func(t *testing.T) { runSignalCase(t, sb, c, "200") })
	}
}

// TestRestoredGuestsDiffer: two VMs restored from one saved state (the
// shared VM and another) do not draw the same random bytes (os.urandom, the
// uuid4 made of them, Python's random seeded from them), and each has the
// host's time, not the saved guest's.
func TestRestoredGuestsDiffer(t *testing.T) {
	sb, _ := sandbox(t)
	const code = "import os, random, time, uuid; print(os.urandom(16).hex(), uuid.uuid4(), random.getrandbits(64), time.time())"
	draw := func(sb *pysandboxes.Sandbox, log *syncBuffer) []string {
		t.Helper()
		out, err := sb.Command(context.Background(), python, "-c", code).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if !strings.Contains(log.String(), "restored=true") {
			t.Skipf("the VM was not restored from a saved state (log: %s)", log.String())
		}
		f := strings.Fields(string(out))
		if len(f) != 4 {
			t.Fatalf("output %q", out)
		}
		var guest float64
		fmt.Sscan(f[3], &guest)
		if d := time.Since(time.Unix(0, int64(guest*1e9))).Abs(); d > time.Minute {
			t.Errorf("the guest's clock is %s away from the host's", d)
		}
		return f[:3]
	}
	a := draw(sb, shared.log)
	logger, log := debugLogger()
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name), pysandboxes.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := draw(other, log)
	for i, what := range []string{"os.urandom", "uuid.uuid4()", "random.getrandbits"} {
		if a[i] == b[i] {
			t.Errorf("two guests restored from one state drew the same %s: %s", what, a[i])
		}
	}
}

// TestProgramsThroughSpares: the guest starts each program's stage 2 ahead
// (a spare, made again 2 s after one is used) or, without one ready, at the
// program's start. Programs started both ways, back to back and after a
// pause, get the same start: their standard streams and an extra descriptor
// relayed, SCHED_OTHER, stage 2 as their parent and pid 1 of a namespace of
// their own, the programs' root (no share of the VM's own, a /tmp of their
// own) and the identity of the host's user.
func TestProgramsThroughSpares(t *testing.T) {
	sb, dir := sandbox(t)
	check := `
import os, sys
extra = os.fdopen(3, "w")
extra.write("extra " + sys.stdin.read().strip())
extra.close()
mounts = [l.split()[4] for l in open("/proc/self/mountinfo")]
print(os.sched_getscheduler(0), os.getppid(), os.getuid() == %d, "/tmp" in mounts,
      any(m.startswith("/.s") or m.startswith("/view") for m in mounts), "mine" in os.listdir("/tmp"))
open("/tmp/mine", "w").close()
`
	for i, pause := range []time.Duration{0, 0, 2500 * time.Millisecond} {
		time.Sleep(pause)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := sb.Command(context.Background(), python, "-c", fmt.Sprintf(check, os.Getuid()))
		cmd.Dir = filepath.Join(dir, "rw")
		cmd.Stdin = strings.NewReader(fmt.Sprintf("run %d\n", i))
		cmd.ExtraFiles = []*os.File{w}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		extra, _ := io.ReadAll(r)
		r.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: %v: %s", i, err, errb.String())
		}
		if want := fmt.Sprintf("extra run %d", i); string(extra) != want {
			t.Errorf("run %d: descriptor 3 brought %q, want %q", i, extra, want)
		}
		if got, want := strings.TrimSpace(out.String()), "0 1 True True False False"; got != want {
			t.Errorf("run %d: policy, parent, uid, /tmp, VM's mounts, an earlier program's file in /tmp: %q, want %q", i, got, want)
		}
	}
}
