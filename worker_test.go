package pysandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// callDir is the directory of the Python module the call tests use.
func callDir(t testing.TB) string {
	dir, err := filepath.Abs("testdata/calls")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// landlockMeta accepts what Landlock never enforces (the names and metadata of
// unexposed paths): the tests that use it test Call and Eval, not that.
var landlockMeta = pysandboxes.AcceptUnenforced(pysandboxes.CapFilesMeta | pysandboxes.CapHide)

// callModImports are the modules callmod.py imports (the application's imports
// need their python-import= rules, loaded or not).
const callModImports = "python-import=asyncio, os, time, datetime, decimal, fractions, uuid, pathlib, ipaddress, collections\n"

// callSandbox makes a sandbox for Call under provider ("landlock" or
// "subprocess") whose policy exposes the test module's directory and allows its
// imports, plus rules.
func callSandbox(t testing.TB, provider, rules string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	return callSandboxWith(t, provider, rules, true, opts...)
}

// callSandboxWith is callSandbox; stream false leaves the calls' output to its
// default (captured) instead of streaming it to buffers.
func callSandboxWith(t testing.TB, provider, rules string, stream bool, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := callDir(t)
	file := filepath.Join(t.TempDir(), ".py-sandboxes")
	if err := os.WriteFile(file, []byte("expose-ro="+dir+"\n"+callModImports+rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Dir: filepath.Dir(file)})
	if err != nil {
		t.Fatal(err)
	}
	base := []pysandboxes.Option{pysandboxes.WithProvider(provider), pysandboxes.WithLogger(quietLogger()),
		pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir})}
	if stream {
		base = append(base, pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}))
	}
	if provider == "subprocess" {
		base = append(base, pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities))
	}
	if provider == "landlock" {
		base = append(base, landlockMeta)
	}
	sb, err := pysandboxes.New(ctx, pol, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// quickRestarts is a restart policy for tests: the same shape, shorter delays.
var quickRestarts = pysandboxes.WithCall(pysandboxes.CallConfig{Restart: pysandboxes.RestartPolicy{
	Max: 5, Window: time.Minute, Backoff: 20 * time.Millisecond, Factor: 1.5, MaxBackoff: 100 * time.Millisecond}})

func mustCall(t testing.TB, sb *pysandboxes.Sandbox, fn string, args ...any) any {
	t.Helper()
	v, err := sb.Call(context.Background(), fn, args...)
	if err != nil {
		t.Fatalf("Call(%s): %v", fn, err)
	}
	return v
}

func workerPid(t testing.TB, sb *pysandboxes.Sandbox) int {
	t.Helper()
	v := mustCall(t, sb, "callmod:pid")
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("pid = %#v", v)
	}
	return int(n)
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCallBasics: positional and keyword arguments, a method reached through a
// class, an async function; the worker is started once and reused.
func TestCallBasics(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	ctx := context.Background()
	if v := mustCall(t, sb, "callmod:add", 1, 2); v != int64(3) {
		t.Errorf("add(1, 2) = %#v", v)
	}
	v, err := sb.CallWith(ctx, "callmod:add", pysandboxes.CallOptions{Kwargs: map[string]any{"b": 5}}, 1)
	if err != nil || v != int64(6) {
		t.Errorf("add(1, b=5) = %#v, %v", v, err)
	}
	if v := mustCall(t, sb, "callmod:Calc.double", 21); v != int64(42) {
		t.Errorf("Calc.double(21) = %#v", v)
	}
	if v := mustCall(t, sb, "callmod:async_add", 40, 2); v != int64(42) {
		t.Errorf("async_add = %#v", v)
	}
	pid := workerPid(t, sb)
	for range 3 {
		if p := workerPid(t, sb); p != pid {
			t.Fatalf("the worker changed: %d then %d", pid, p)
		}
	}
}

// TestCallAsyncInit: an async init function runs inside before the first call.
func TestCallAsyncInit(t *testing.T) {
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:async_init"}))
	if v := mustCall(t, sb, "callmod:init_count"); v != int64(1) {
		t.Errorf("init_count = %#v, want 1", v)
	}
}

// TestCallRefusals: what cannot be called is refused with a clear error.
func TestCallRefusals(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	ctx := context.Background()
	for _, c := range []struct {
		fn, class, msg string
	}{
		{"callmod:gen", "TypeError", "generators cannot be sent across the sandbox boundary"},
		{"callmod:unpicklable", "AttributeError", "the result of callmod:unpicklable cannot be sent to the host"},
		{"callmod:missing", "AttributeError", "missing"},
		{"nosuchmodule:f", "ModuleNotFoundError", "nosuchmodule"},
		{"callmod:INIT_COUNT", "TypeError", "is not callable"},
	} {
		_, err := sb.Call(ctx, c.fn)
		var re *pysandboxes.RemoteError
		if !errors.As(err, &re) || re.Class() != c.class || !strings.Contains(re.Message, c.msg) || re.Denied() {
			t.Errorf("Call(%s) = %v, want %s containing %q", c.fn, err, c.class, c.msg)
		}
	}
	for _, fn := range []string{"callmod", "callmod:", ":f", "a b:f", "callmod:f-g", "callmod:<lambda>"} {
		if _, err := sb.Call(ctx, fn); err == nil || !strings.Contains(err.Error(), "is not a function name") {
			t.Errorf("Call(%q) = %v", fn, err)
		}
	}
	_, err := sb.Call(ctx, "callmod:ident", make(chan int))
	if err == nil || !strings.Contains(err.Error(), "args[0]") {
		t.Errorf("Call with a channel = %v", err)
	}
	_, err = sb.CallWith(ctx, "callmod:add", pysandboxes.CallOptions{Kwargs: map[string]any{"not valid": 1}}, 1)
	if err == nil {
		t.Error("a keyword that is not an identifier was accepted")
	}
	// SystemExit ends the call, not the worker.
	pid := workerPid(t, sb)
	_, err = sb.Call(ctx, "callmod:exit_call")
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || !re.Base || re.Qualname != "SystemExit" {
		t.Errorf("exit_call = %v", err)
	}
	if p := workerPid(t, sb); p != pid {
		t.Errorf("SystemExit replaced the worker")
	}
}

// TestCallAfterClose: Close stops the workers; later calls fail at once.
func TestCallAfterClose(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	pid := workerPid(t, sb)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 5*time.Second, pid)
	if _, err := sb.Call(context.Background(), "callmod:noop"); !errors.Is(err, pysandboxes.ErrSandboxClosed) {
		t.Errorf("Call after Close = %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestCallEagerWorkers: CallConfig.Eager starts the workers (and runs init) in
// New; a failing init makes New fail.
func TestCallEagerWorkers(t *testing.T) {
	out := &syncBuffer{}
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Eager: true}), pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:init"}),
		pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: out, Stderr: out}))
	if !strings.Contains(out.String(), "init ran") {
		t.Errorf("init did not run in New: output %q", out.String())
	}
	if v := mustCall(t, sb, "callmod:init_count"); v != int64(1) {
		t.Errorf("init_count = %#v", v)
	}

	dir := callDir(t)
	pol, err := policy.NewBuilder().ExposeRO(dir).PythonImport("asyncio", "os").Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger()), landlockMeta,
		pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}), pysandboxes.WithCall(pysandboxes.CallConfig{Eager: true}),
		pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:failing_init"}), pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: io.Discard, Stderr: io.Discard}))
	var we *pysandboxes.WorkerError
	var re *pysandboxes.RemoteError
	if !errors.As(err, &we) || !errors.As(err, &re) || re.Message != "init failed on purpose" ||
		!strings.Contains(re.Traceback, "in failing_init") {
		t.Errorf("New with a failing init = %v", err)
	}
}

// TestCallPythonLayerOff: with py-sandbox=false the worker runs under the OS
// provider only: no import rule applies.
func TestCallPythonLayerOff(t *testing.T) {
	sb := callSandbox(t, "landlock", "py-sandbox=false\n")
	if v := mustCall(t, sb, "callmod:imports_json"); v != "[1]" {
		t.Errorf("imports_json = %#v", v)
	}
	sb2 := callSandbox(t, "landlock", "")
	_, err := sb2.Call(context.Background(), "callmod:imports_json")
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || !re.Denied() || re.Denials[0].Kind != "import" {
		t.Errorf("imports_json with the layer = %v", err)
	}
}

func killPid(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
