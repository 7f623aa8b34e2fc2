package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pysbmcp "github.com/pysandboxes/pysandboxes/mcp"
)

// TestToolsListed: both tools are listed with their input schema (the
// required arguments, no others) and an output schema.
func TestToolsListed(t *testing.T) {
	cs, _ := connect(t, nil)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"run_python": {"code"}, "eval_python": {"source"}}
	for _, tl := range lt.Tools {
		req, ok := want[tl.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tl.Name)
			continue
		}
		delete(want, tl.Name)
		in := mustJSON(tl.InputSchema)
		if !strings.Contains(in, `"required":`+mustJSON(req)) || !strings.Contains(in, `"additionalProperties":false`) {
			t.Errorf("%s: input schema %s", tl.Name, in)
		}
		if tl.OutputSchema == nil || tl.Description == "" {
			t.Errorf("%s: no output schema or description", tl.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("tools not listed: %v", want)
	}
}

// TestRunPython: the code runs, reads its stdin, prints on both streams, reads
// the exposed directory; the result is the exit code and both streams, as
// structured content and as the same JSON in text.
func TestRunPython(t *testing.T) {
	cs, _ := connect(t, nil)
	code := fmt.Sprintf(`import sys, json
print("hello", sys.stdin.read().strip())
print(sum(json.load(open(%q))), file=sys.stderr)`, filepath.Join(data, "numbers.json"))
	res := call(t, cs, "run_python", map[string]any{"code": code, "stdin": "world\n"})
	var r pysbmcp.RunResult
	structured(t, res, &r)
	if res.IsError || r.ExitCode != 0 || r.Stdout != "hello world\n" || r.Stderr != "6\n" || len(r.Refusals) != 0 {
		t.Fatalf("isError %v, %+v\n%s", res.IsError, r, textOf(res))
	}
	var fromText any
	if err := json.Unmarshal([]byte(textOf(res)), &fromText); err != nil || mustJSON(fromText) != mustJSON(res.StructuredContent) {
		t.Errorf("text %q is not the structured content %s", textOf(res), mustJSON(res.StructuredContent))
	}
}

// TestRunPythonRefusals: each refusal of the Python layer is a tool result
// with isError (never a protocol error), naming the exception, what refused it
// (the implicit default policy, or the rule) and the rule line that would allow
// it; the session goes on.
func TestRunPythonRefusals(t *testing.T) {
	cs, _ := connect(t, nil)
	written := filepath.Join(data, "out.txt")
	cases := []struct {
		name, code            string
		kind, exc, fix, by    string
		messageHas, targetHas string
	}{
		{"import", "import socket", "import", "RuleModuleNotFoundError", "python-import=socket",
			"the implicit default policy", "Module named 'socket'", "socket"},
		{"import-danger", "import ctypes", "import", "RuleModuleNotFoundError", "python-import=ctypes",
			"the implicit default policy", "Dangerous", "ctypes"},
		{"file", "open('/etc/shadow').read()", "file", "RuleFileNotFoundError", "expose-ro=/etc/shadow",
			"the implicit default policy", "/etc/shadow", "/etc/shadow"},
		{"write", fmt.Sprintf("open(%q, 'w').write('x')", written), "file", "RulePermissionError", "expose-rw=" + written,
			"the rule 'expose-ro=${DATA}' from <arg>(1)", "Cannot write", written},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, cs, "run_python", map[string]any{"code": c.code})
			var r pysbmcp.RunResult
			structured(t, res, &r)
			if !res.IsError || r.ExitCode != 1 {
				t.Fatalf("isError %v, exit %d; want a tool error, exit 1\n%s", res.IsError, r.ExitCode, textOf(res))
			}
			if len(r.Refusals) != 1 {
				t.Fatalf("refusals %+v, want one", r.Refusals)
			}
			f := r.Refusals[0]
			if f.Kind != c.kind || !strings.HasSuffix(f.Exception, c.exc) || f.Fix != c.fix || f.DeniedBy != c.by ||
				!strings.Contains(f.Message, c.messageHas) || f.Target != c.targetHas {
				t.Errorf("refusal %+v\nwant kind %s, exception %s, fix %s, denied by %s, message with %q, target %s",
					f, c.kind, c.exc, c.fix, c.by, c.messageHas, c.targetHas)
			}
			if !strings.Contains(r.Stderr, c.exc) {
				t.Errorf("stderr %q does not hold the exception", r.Stderr)
			}
			text := textOf(res)
			if !strings.Contains(text, "rule line that would allow it: "+c.fix) || !strings.Contains(text, "denied by "+c.by) {
				t.Errorf("text does not name the rule and the fix:\n%s", text)
			}
		})
	}
	// The session goes on.
	res := call(t, cs, "run_python", map[string]any{"code": "print(1)"})
	if res.IsError {
		t.Fatalf("after the refusals: %s", textOf(res))
	}
}

// TestRunPythonNetworkRefusal: a connection the policy does not grant is
// refused, with the net= line that would allow it.
func TestRunPythonNetworkRefusal(t *testing.T) {
	cs, _ := connectWith(t, "python-import=socket\n", nil)
	res := call(t, cs, "run_python", map[string]any{"code": "import socket; socket.create_connection(('127.0.0.1', 9), timeout=2)"})
	var r pysbmcp.RunResult
	structured(t, res, &r)
	if !res.IsError || len(r.Refusals) != 1 {
		t.Fatalf("isError %v, %+v", res.IsError, r)
	}
	f := r.Refusals[0]
	if f.Kind != "network" || !strings.Contains(f.Exception, "ConnectionRefusedError") || f.Fix != "net=ALLOW|tcp|127.0.0.1|9|OUT" ||
		f.Target != "[127.0.0.1]:9" {
		t.Errorf("refusal %+v", f)
	}
}

// TestRunPythonCaughtRefusal: a program that catches a refusal and exits 0
// succeeds, and the refusal is still listed.
func TestRunPythonCaughtRefusal(t *testing.T) {
	cs, _ := connect(t, nil)
	res := call(t, cs, "run_python", map[string]any{"code": "try:\n import socket\nexcept ImportError:\n print('no socket')"})
	var r pysbmcp.RunResult
	structured(t, res, &r)
	if res.IsError || r.Stdout != "no socket\n" || len(r.Refusals) != 1 || r.Refusals[0].Fix != "python-import=socket" {
		t.Fatalf("isError %v, %+v", res.IsError, r)
	}
}

// TestRunPythonExitStatus: a status other than 0 is a tool error carrying it.
func TestRunPythonExitStatus(t *testing.T) {
	cs, _ := connect(t, nil)
	res := call(t, cs, "run_python", map[string]any{"code": "import sys; print('bye'); sys.exit(3)"})
	var r pysbmcp.RunResult
	structured(t, res, &r)
	if !res.IsError || r.ExitCode != 3 || r.Stdout != "bye\n" || !strings.Contains(textOf(res), "exited with status 3") {
		t.Fatalf("isError %v, %+v\n%s", res.IsError, r, textOf(res))
	}
}

// TestRunPythonTimeout: past timeout_s the program is killed, and the result
// says so.
func TestRunPythonTimeout(t *testing.T) {
	pids := make(chan int, 1)
	cs, _ := connect(t, &pysbmcp.Options{Started: func(pid int) { pids <- pid }})
	res := call(t, cs, "run_python", map[string]any{"code": "import time\nprint('start', flush=True)\ntime.sleep(60)", "timeout_s": 2})
	var r pysbmcp.RunResult
	structured(t, res, &r)
	if !res.IsError || !r.TimedOut || r.ExitCode != -1 || r.Stdout != "start\n" || !strings.Contains(r.Error, "timed out after 2s") {
		t.Fatalf("isError %v, %+v", res.IsError, r)
	}
	waitGone(t, pidFrom(t, pids))
}

// TestRunPythonOutputBound: past MaxOutput the program is killed; the result
// holds the output up to the bound.
func TestRunPythonOutputBound(t *testing.T) {
	const limit = 64 << 10
	cs, _ := connect(t, &pysbmcp.Options{MaxOutput: limit})
	res := call(t, cs, "run_python", map[string]any{"code": "import sys\nwhile True:\n print('x' * 1000)\n print('y' * 1000, file=sys.stderr)"})
	var r pysbmcp.RunResult
	structured(t, res, &r)
	if !res.IsError || !r.Truncated || len(r.Stdout)+len(r.Stderr) != limit || !strings.Contains(r.Error, "more than 65536 bytes") {
		t.Fatalf("isError %v, truncated %v, %d+%d bytes, error %q", res.IsError, r.Truncated, len(r.Stdout), len(r.Stderr), r.Error)
	}
}

// TestRunPythonCancelKills: a cancelled request (notifications/cancelled)
// kills the program it started.
func TestRunPythonCancelKills(t *testing.T) {
	pids := make(chan int, 1)
	cs, _ := connect(t, &pysbmcp.Options{Started: func(pid int) { pids <- pid }})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time; time.sleep(60)"}})
		errc <- err
	}()
	pid := pidFrom(t, pids)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool after cancel: %v", err)
	}
	waitGone(t, pid)
	// The session goes on.
	if res := call(t, cs, "run_python", map[string]any{"code": "print(2)"}); res.IsError {
		t.Fatal(textOf(res))
	}
}

// TestSessionCloseKills: a session whose client goes away (its end of the
// stream closes, as when the client process dies) kills what its calls
// started. (The SDK's own ClientSession.Close waits for the calls in flight:
// it is not the client going away.)
func TestSessionCloseKills(t *testing.T) {
	pids := make(chan int, 1)
	sb := sandbox(t)
	server := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	tools := pysbmcp.AddTools(server, sb, &pysbmcp.Options{Started: func(pid int) { pids <- pid }})
	defer tools.Close()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	ctx := context.Background()
	ss, err := server.Connect(ctx, &sdk.IOTransport{Reader: c2sR, Writer: s2cW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, &sdk.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time; time.sleep(60)"}})
	pid := pidFrom(t, pids)
	c2sW.Close()
	s2cR.Close()
	waitGone(t, pid)
	ss.Wait()
}

// TestConcurrentCalls: 20 calls at once all succeed, and no more than
// MaxConcurrent programs run at any moment (their intervals, measured by the
// programs on the system's monotonic clock, never overlap more).
func TestConcurrentCalls(t *testing.T) {
	const limit = 4
	cs, _ := connect(t, &pysbmcp.Options{MaxConcurrent: limit})
	type span struct{ start, end float64 }
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool, args := "run_python", map[string]any{"code": fmt.Sprintf("import time\ns = time.monotonic(); time.sleep(0.2); print(%d, s, time.monotonic())", i)}
			if i%5 == 4 {
				tool, args = "eval_python", map[string]any{"source": "a * b", "names": map[string]any{"a": i, "b": 2}}
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				t.Errorf("call %d: %v %v", i, err, res)
				return
			}
			if tool == "eval_python" {
				var r pysbmcp.EvalResult
				structured(t, res, &r)
				if string(r.Value) != strconv.Itoa(i*2) {
					t.Errorf("eval %d: %s", i, r.Value)
				}
				return
			}
			var r pysbmcp.RunResult
			structured(t, res, &r)
			f := strings.Fields(r.Stdout)
			if len(f) != 3 || f[0] != strconv.Itoa(i) {
				t.Errorf("call %d printed %q", i, r.Stdout)
				return
			}
			s, _ := strconv.ParseFloat(f[1], 64)
			e, _ := strconv.ParseFloat(f[2], 64)
			mu.Lock()
			spans = append(spans, span{s, e})
			mu.Unlock()
		}()
	}
	wg.Wait()
	// The most intervals open at once.
	type edge struct {
		at    float64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	open, peak := 0, 0
	for _, e := range edges {
		open += e.delta
		peak = max(peak, open)
	}
	if peak > limit {
		t.Errorf("%d programs ran at once, more than %d", peak, limit)
	}
	t.Logf("%d programs ran, at most %d at once", len(spans), peak)
}

// TestBadArguments: arguments outside the input schema, or past the bounds,
// are tool errors, and nothing runs.
func TestBadArguments(t *testing.T) {
	cs, _ := connect(t, &pysbmcp.Options{MaxSource: 1000})
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_python", map[string]any{}, "code"},
		{"run_python", map[string]any{"code": "1", "shell": "yes"}, "shell"},
		{"run_python", map[string]any{"code": 1}, "code"},
		{"run_python", map[string]any{"code": "1", "timeout_s": -1}, "timeout_s"},
		{"run_python", map[string]any{"code": strings.Repeat("#", 1001)}, "limited to 1000 bytes"},
		{"run_python", map[string]any{"code": "print(1)\x00"}, "NUL"},
		{"eval_python", map[string]any{"source": "1", "mode": "run"}, "mode"},
		{"eval_python", map[string]any{"source": "1", "names": []any{1}}, "names"},
		{"eval_python", map[string]any{"source": "a", "names": map[string]any{"not-a-name": 1}}, `"not-a-name" is not a Python identifier`},
		{"eval_python", map[string]any{"source": "a", "names": map[string]any{"a": map[string]any{"b": []any{1, json.Number("10" + strings.Repeat("0", 4400))}}}}, "digits"},
		{"eval_python", map[string]any{"source": strings.Repeat("1+", 600) + "1"}, "limited to 1000 bytes"},
	}
	for _, c := range cases {
		res := call(t, cs, c.tool, c.args)
		if !res.IsError || !strings.Contains(textOf(res), c.want) {
			t.Errorf("%s %.80v: isError %v, %q; want a tool error naming %q", c.tool, c.args, res.IsError, textOf(res), c.want)
		}
	}
}

// TestEvalValue: the value comes back as JSON in transport.JSON's form: dicts
// in their order, big ints with every digit, tuples as arrays, floats as
// Python writes them.
func TestEvalValue(t *testing.T) {
	cs, _ := connect(t, nil)
	// Raw JSON, so that the order of d's keys and n's digits reach the server
	// as written.
	nm := json.RawMessage(`{"d": {"z": 1, "a": [2.5, true, null]}, "n": 123456789012345678901234567890}`)
	cases := []struct{ source, want string }{
		{"d", `{"z":1,"a":[2.5,true,null]}`},
		{"n + 1", `123456789012345678901234567891`},
		{"(n > 0, 1 / 4, 'é')", `[true,0.25,"é"]`},
		{"2 ** 0.5", `1.4142135623730951`},
	}
	for _, c := range cases {
		res := call(t, cs, "eval_python", map[string]any{"source": c.source, "names": nm})
		// The text is the structured content as the server wrote it (the
		// client's decoding of structuredContent into Go values would lose
		// the order and the digits).
		var r pysbmcp.EvalResult
		if err := json.Unmarshal([]byte(textOf(res)), &r); err != nil {
			t.Fatalf("%s: %v: %s", c.source, err, textOf(res))
		}
		if res.IsError || string(r.Value) != c.want {
			t.Errorf("%s: isError %v, value %s, want %s\n%s", c.source, res.IsError, r.Value, c.want, textOf(res))
		}
		if want := `{"value":` + c.want + `}`; textOf(res) != want {
			t.Errorf("%s: text %s, want %s", c.source, textOf(res), want)
		}
	}
}

// TestEvalExec: mode exec returns the names the statements bound.
func TestEvalExec(t *testing.T) {
	cs, _ := connect(t, nil)
	res := call(t, cs, "eval_python", map[string]any{"source": "x = a + 1\ny = x * 2", "names": map[string]any{"a": 1}, "mode": "exec", "profile": "stmts"})
	var r pysbmcp.EvalResult
	structured(t, res, &r)
	if res.IsError || string(r.Value) != `{"x":2,"y":4}` {
		t.Fatalf("isError %v, %+v\n%s", res.IsError, r, textOf(res))
	}
}

// TestEvalRejected: a source outside the profile is a tool error listing every
// violation with the rule line that would allow it; nothing ran.
func TestEvalRejected(t *testing.T) {
	cs, _ := connect(t, nil)
	res := call(t, cs, "eval_python", map[string]any{"source": "[x for x in range(3)] + __import__('os').listdir('/')"})
	var r pysbmcp.EvalResult
	structured(t, res, &r)
	if !res.IsError || len(r.Violations) == 0 || r.Value != nil {
		t.Fatalf("isError %v, %+v", res.IsError, r)
	}
	fixes := map[string]bool{}
	for _, v := range r.Violations {
		fixes[v.Fix] = true
		if v.Line != 1 || v.Message == "" {
			t.Errorf("violation %+v", v)
		}
	}
	for _, want := range []string{"eval-call=range", "eval-call=__import__", "eval-attribute=listdir"} {
		if !fixes[want] {
			t.Errorf("no violation with the fix %s: %+v", want, r.Violations)
		}
		if !strings.Contains(textOf(res), "rule line that would allow it: "+want) {
			t.Errorf("the text does not give %s:\n%s", want, textOf(res))
		}
	}
	for _, v := range r.Violations {
		if v.Fix == "eval-call=__import__" && v.Warning == "" {
			t.Errorf("the fix eval-call=__import__ carries no warning: %+v", v)
		}
	}
}

// TestEvalInterrupted: an evaluation past a budget is a tool error naming the
// budget as a rule line.
func TestEvalInterrupted(t *testing.T) {
	cs, _ := connect(t, nil)
	res := call(t, cs, "eval_python", map[string]any{"source": "sum(i for i in range(10**6))", "profile": "loop"})
	var r pysbmcp.EvalResult
	structured(t, res, &r)
	if !res.IsError || r.Interrupted == nil || r.Interrupted.Budget != "eval-max-iterations" || r.Interrupted.Limit != "eval-max-iterations=1000" {
		t.Fatalf("isError %v, %+v\n%s", res.IsError, r, textOf(res))
	}
	if !strings.Contains(textOf(res), "interrupted by its budget eval-max-iterations=1000") {
		t.Errorf("text:\n%s", textOf(res))
	}
	// Within the budget, the same profile gives the value.
	res = call(t, cs, "eval_python", map[string]any{"source": "sum(i for i in range(10))", "profile": "loop"})
	var r2 pysbmcp.EvalResult
	structured(t, res, &r2)
	if res.IsError || string(r2.Value) != "45" {
		t.Fatalf("isError %v, %+v", res.IsError, r2)
	}
}

// TestEvalRaises: an exception is a tool error with its class and message; an
// unknown profile, a tool error saying so.
func TestEvalRaises(t *testing.T) {
	cs, _ := connect(t, nil)
	res := call(t, cs, "eval_python", map[string]any{"source": "1 / 0"})
	var r pysbmcp.EvalResult
	structured(t, res, &r)
	if !res.IsError || r.Exception == nil || r.Exception.Class != "ZeroDivisionError" || !strings.Contains(textOf(res), "ZeroDivisionError") {
		t.Fatalf("isError %v, %+v", res.IsError, r)
	}
	res = call(t, cs, "eval_python", map[string]any{"source": "1", "profile": "nosuch"})
	if !res.IsError || !strings.Contains(textOf(res), "nosuch") {
		t.Fatalf("unknown profile: isError %v, %s", res.IsError, textOf(res))
	}
}

// TestShutdown: Shutdown lets a call in flight end within the grace, refuses
// new calls (a tool error); past the grace it kills what the calls run.
func TestShutdown(t *testing.T) {
	pids := make(chan int, 2)
	cs, tools := connect(t, &pysbmcp.Options{Started: func(pid int) { pids <- pid }})
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time; time.sleep(0.5); print('done')"}})
		done <- res
	}()
	pidFrom(t, pids)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tools.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if res := <-done; res == nil || res.IsError || !strings.Contains(textOf(res), "done") {
		t.Fatalf("the call in flight: %v", res)
	}
	res := call(t, cs, "run_python", map[string]any{"code": "print(1)"})
	if !res.IsError || !strings.Contains(textOf(res), "shutting down") {
		t.Fatalf("a call after Shutdown: %s", textOf(res))
	}

	// Past the grace, the call is killed.
	cs2, tools2 := connect(t, &pysbmcp.Options{Started: func(pid int) { pids <- pid }})
	go cs2.CallTool(context.Background(), &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": "import time; time.sleep(60)"}})
	pid := pidFrom(t, pids)
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if err := tools2.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown past the grace: %v", err)
	}
	waitGone(t, pid)
}
