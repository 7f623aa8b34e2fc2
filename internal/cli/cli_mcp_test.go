package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpRules is the policy the MCP server tests serve under.
const mcpRules = `python-import=json, time, os
eval-syntax=arith, compare
eval-syntax:loop=arith, comprehension
eval-call:loop=range, sum
eval-max-iterations:loop=1000
`

// mcpDir is a working directory with mcpRules as its rule file.
func mcpDir(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3: the tools run real Python")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".py-sandboxes"), mcpRules+"expose-rw="+filepath.Join(dir, "run")+"\n")
	if err := os.Mkdir(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mcpEnv is the environment of the server under test.
func mcpEnv(dir string, extra ...string) []string {
	return append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir}, extra...)
}

// stdioSession starts pysandboxes mcp over stdio in dir, and connects the
// SDK's client to it.
func stdioSession(t *testing.T, dir string, args ...string) (*sdk.ClientSession, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"mcp"}, args...)...)
	cmd.Dir = dir
	cmd.Env = mcpEnv(dir)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "cli-test", Version: "v0"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to pysandboxes mcp: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, &stderr.Buffer
}

type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// callTool calls a tool; a protocol error fails the test.
func callTool(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (*sdk.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol error, not a tool result: %v", tool, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return res, strings.Join(parts, "\n")
}

// exercise runs the checks both transports share: values, refusals with the
// rule and its fix line, eval rejections, budgets and timeouts, each a tool
// result, the session going on.
func exercise(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 2 || lt.Tools[0].OutputSchema == nil || lt.Tools[1].OutputSchema == nil {
		t.Fatalf("tools/list: %v, %+v", err, lt)
	}

	// A value. What the program prints goes to the result, never to the
	// protocol stream, even written on descriptor 1 directly.
	res, text := callTool(t, cs, "run_python", map[string]any{"code": "import os, json\nos.write(1, b'raw\\n')\nprint(json.dumps({'n': 6 * 7}))"})
	if res.IsError || !strings.Contains(text, `"stdout":"raw\n{\"n\": 42}\n"`) {
		t.Errorf("run_python: isError %v, %s", res.IsError, text)
	}
	// A refusal: isError, the exception, the rule, the fix line.
	res, text = callTool(t, cs, "run_python", map[string]any{"code": "import socket"})
	if !res.IsError || !strings.Contains(text, "RuleModuleNotFoundError") ||
		!strings.Contains(text, "denied by the implicit default policy") ||
		!strings.Contains(text, "rule line that would allow it: python-import=socket") {
		t.Errorf("import socket: isError %v, %s", res.IsError, text)
	}
	// A file the policy does not expose: refused by the Python layer with the
	// errno's class, and the expose line.
	res, text = callTool(t, cs, "run_python", map[string]any{"code": "open('/etc/shadow').read()"})
	if !res.IsError || !strings.Contains(text, "RuleFileNotFoundError") || !strings.Contains(text, "expose-ro=/etc/shadow") {
		t.Errorf("open /etc/shadow: isError %v, %s", res.IsError, text)
	}
	// A timeout kills the program.
	res, text = callTool(t, cs, "run_python", map[string]any{"code": "import time\ntime.sleep(30)", "timeout_s": 1})
	if !res.IsError || !strings.Contains(text, "timed out after 1s") {
		t.Errorf("timeout: isError %v, %s", res.IsError, text)
	}
	// eval_python: a value, a rejection with its fix line, a budget.
	res, text = callTool(t, cs, "eval_python", map[string]any{"source": "a * 2 + 1", "names": map[string]any{"a": 20}})
	if res.IsError || text != `{"value":41}` {
		t.Errorf("eval: isError %v, %s", res.IsError, text)
	}
	res, text = callTool(t, cs, "eval_python", map[string]any{"source": "__import__('os').system('id')"})
	if !res.IsError || !strings.Contains(text, "rejects the source") || !strings.Contains(text, "rule line that would allow it: eval-call=__import__") {
		t.Errorf("eval rejected: isError %v, %s", res.IsError, text)
	}
	res, text = callTool(t, cs, "eval_python", map[string]any{"source": "sum(i for i in range(10**6))", "profile": "loop"})
	if !res.IsError || !strings.Contains(text, "interrupted by its budget eval-max-iterations=1000") {
		t.Errorf("eval budget: isError %v, %s", res.IsError, text)
	}
	// The session goes on.
	if res, text = callTool(t, cs, "eval_python", map[string]any{"source": "1 + 1"}); res.IsError || text != `{"value":2}` {
		t.Errorf("after the refusals: %s", text)
	}
}

// TestMCPStdio drives pysandboxes mcp over stdio with the SDK's client.
func TestMCPStdio(t *testing.T) {
	dir := mcpDir(t)
	cs, _ := stdioSession(t, dir)
	exercise(t, cs)
}

// sleeper is a program that opens a marker file of dir/run, keeps it open
// and sleeps: it runs while a process holds the file open (found through
// /proc/PID/fd, whatever the provider's PID namespace).
func sleeper(t *testing.T, dir string) (code, marker string) {
	marker = filepath.Join(dir, "run", fmt.Sprintf("m%d", time.Now().UnixNano()))
	return fmt.Sprintf("import time\nf = open(%q, 'w')\ntime.sleep(60)", marker), marker
}

// holders returns the processes that hold path open.
func holders(path string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + e.Name() + "/fd")
		for _, fd := range fds {
			if l, err := os.Readlink("/proc/" + e.Name() + "/fd/" + fd.Name()); err == nil && l == path {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitProcs waits until a process holds marker open (want) or none does
// (!want).
func waitProcs(t *testing.T, marker string, want bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for (len(holders(marker)) > 0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("processes holding %s: %v, want some: %v", marker, holders(marker), want)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestMCPStdioCancelAndClose: a cancelled request kills the program it
// started, and so does the client going away (its end of stdin closing).
func TestMCPStdioCancelAndClose(t *testing.T) {
	dir := mcpDir(t)
	cs, _ := stdioSession(t, dir)
	code, m := sleeper(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
		errc <- err
	}()
	waitProcs(t, m, true)
	cancel()
	<-errc
	waitProcs(t, m, false)
	if res, text := callTool(t, cs, "eval_python", map[string]any{"source": "2 * 3"}); res.IsError || text != `{"value":6}` {
		t.Fatalf("after a cancellation: %s", text)
	}

	// The client goes away: the server's stdin closes, the server kills
	// what runs and exits.
	cmd := exec.Command(binary, "mcp")
	cmd.Dir, cmd.Env = dir, mcpEnv(dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code2, m2 := sleeper(t, dir)
	code2js, _ := json.Marshal(code2)
	w := bufio.NewWriter(stdin)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python","arguments":{"code":%s}}}`, code2js),
	} {
		w.WriteString(msg + "\n")
	}
	w.Flush()
	go io.Copy(io.Discard, stdout)
	waitProcs(t, m2, true)
	stdin.Close()
	waitProcs(t, m2, false)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pysandboxes mcp after stdin closed: %v, want exit 0", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("pysandboxes mcp still runs after its stdin closed")
	}
}

// httpServer starts pysandboxes mcp --http ADDR in dir and returns its base URL
// (http://127.0.0.1:PORT) and the command.
func httpServer(t *testing.T, dir, addr string, env []string, args ...string) (string, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"mcp", "--http", addr}, args...)...)
	cmd.Dir = dir
	cmd.Env = mcpEnv(dir, env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	re := regexp.MustCompile(`serving MCP on http://\S+:(\d+)/mcp`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return "http://127.0.0.1:" + m[1], cmd, stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("pysandboxes mcp --http did not start:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bearer adds a bearer token to the requests of an HTTP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func httpSession(t *testing.T, base, token string) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{token}}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "cli-test", Version: "v0"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", base, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPHTTP drives pysandboxes mcp --http with the SDK's client: the same
// checks as over stdio, cancellation, 20 concurrent calls bounded by
// --concurrency, the HTTP checks, and a graceful shutdown on SIGTERM.
func TestMCPHTTP(t *testing.T) {
	dir := mcpDir(t)
	base, cmd, stderr := httpServer(t, dir, "127.0.0.1:0", nil, "--concurrency", "4", "--max-request", "64K")
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	cs := httpSession(t, base, "")
	exercise(t, cs)

	t.Run("cancel", func(t *testing.T) {
		code, m := sleeper(t, dir)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_python", Arguments: map[string]any{"code": code}})
			errc <- err
		}()
		waitProcs(t, m, true)
		cancel()
		<-errc
		waitProcs(t, m, false)
	})

	t.Run("concurrent", func(t *testing.T) {
		// 20 calls at once from 10 sessions, all answered with their own
		// value. (That --concurrency bounds the programs running at once is
		// measured by the mcp package's tests.)
		const calls = 20
		sessions := []*sdk.ClientSession{cs}
		for len(sessions) < 10 {
			sessions = append(sessions, httpSession(t, base, ""))
		}
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tool, args := "eval_python", map[string]any{"source": "i * 3", "names": map[string]any{"i": i}}
				if i%5 == 0 {
					tool, args = "run_python", map[string]any{"code": fmt.Sprintf("print(%d * 3)", i)}
				}
				res, text := callTool(t, sessions[i%len(sessions)], tool, args)
				want := fmt.Sprintf(`{"value":%d}`, i*3)
				if tool == "run_python" {
					want = fmt.Sprintf(`"stdout":"%d\n"`, i*3)
				}
				if res.IsError || !strings.Contains(text, want) {
					t.Errorf("call %d: %s, want %s", i, text, want)
				}
			}()
		}
		wg.Wait()
	})

	t.Run("checks", func(t *testing.T) {
		post := func(body string, hdr map[string]string) int {
			req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
		if c := post(init, nil); c != 200 {
			t.Errorf("initialize: %d, want 200", c)
		}
		if c := post(init, map[string]string{"Origin": "https://evil.example"}); c != 403 {
			t.Errorf("a foreign Origin: %d, want 403", c)
		}
		if c := post(init, map[string]string{"Host": "evil.example"}); c != 403 {
			t.Errorf("DNS rebinding (Host evil.example on loopback): %d, want 403", c)
		}
		if c := post(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("x", 70<<10)+`"}}`, nil); c != 413 {
			t.Errorf("a body past --max-request: %d, want 413", c)
		}
	})

	// SIGTERM: the server stops, exit 0.
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stderr.String(), "shutting down") {
			t.Errorf("after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("pysandboxes mcp still runs 20 s after SIGTERM")
	}
}

// TestMCPHTTPBeyondLoopback: an address beyond loopback is refused without a
// bearer token (exit 2); with one, requests without it are refused (401) and
// the token is never on the command line nor in what the tools see.
func TestMCPHTTPBeyondLoopback(t *testing.T) {
	dir := mcpDir(t)
	out, errs, code := pysb(t, dir, "mcp", "--http", "0.0.0.0:0")
	if code != 2 || out != "" || !strings.Contains(errs, "give a bearer token") {
		t.Fatalf("--http 0.0.0.0:0 without a token: exit %d, stdout %q, stderr %q; want 2", code, out, errs)
	}
	// No host is loopback, not every address.
	if _, _, stderr := httpServer(t, dir, ":0", nil); !strings.Contains(stderr.String(), "on http://127.0.0.1:") {
		t.Errorf("--http :0 does not listen on loopback:\n%s", stderr)
	}
	const token = "s3cret-token-0123456789abcdef"
	base, _, _ := httpServer(t, dir, "0.0.0.0:0", []string{"PYSANDBOXES_MCP_TOKEN=" + token}, "--env=PYSANDBOXES_MCP_TOKEN=${PYSANDBOXES_MCP_TOKEN}")
	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v, want 401", resp, err)
	}
	resp.Body.Close()
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health without a token: %v %v, want 200", resp, err)
	}
	cs := httpSession(t, base, token)
	res, text := callTool(t, cs, "run_python", map[string]any{"code": "import os\nprint(os.environ.get('PYSANDBOXES_MCP_TOKEN'))"})
	if res.IsError || strings.Contains(text, token) {
		t.Errorf("the token reached the code: %s", text)
	}
}
