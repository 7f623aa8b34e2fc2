package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	_ "github.com/pysandboxes/pysandboxes/landlock"
	pysbmcp "github.com/pysandboxes/pysandboxes/mcp"
	"github.com/pysandboxes/pysandboxes/policy"
	_ "github.com/pysandboxes/pysandboxes/unshare"
)

// python is the interpreter of the tests: the system's, never a version
// manager's shim.
const python = "/usr/bin/python3"

// testRules is the policy of the tests: a read-only data directory (DATA), a
// few modules, and eval profiles: the default one (arithmetic), "loop" (with
// comprehensions and a small iteration budget) and "stmts" (assignments).
const testRules = `expose-ro=${DATA}
python-import=json, time, sys
eval-syntax=arith, compare
eval-syntax:loop=arith, compare, comprehension
eval-call:loop=range, sum, len
eval-max-iterations:loop=1000
eval-syntax:stmts=arith, assign
`

var (
	sbOnce sync.Once
	sbErr  error
	shared *pysandboxes.Sandbox
	data   string
)

// sandbox returns the sandbox the tests share, under testRules, or skips.
func sandbox(t testing.TB) *pysandboxes.Sandbox {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s: the tools run real Python", python)
	}
	sbOnce.Do(func() {
		data, sbErr = os.MkdirTemp("", "pysbmcp-data-")
		if sbErr != nil {
			return
		}
		if sbErr = os.WriteFile(filepath.Join(data, "numbers.json"), []byte("[1, 2, 3]\n"), 0o644); sbErr != nil {
			return
		}
		ctx := context.Background()
		var pol *policy.Policy
		pol, sbErr = policy.Parse(ctx, "", []byte(testRules), &policy.Options{Env: []string{"DATA=" + data}})
		if sbErr != nil {
			return
		}
		shared, sbErr = pysandboxes.New(ctx, pol, pysandboxes.WithPython(python))
	})
	if sbErr != nil {
		t.Fatalf("sandbox: %v", sbErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	if data != "" {
		os.RemoveAll(data)
	}
	os.Exit(code)
}

// connect serves the tools over an in-memory transport and returns a client
// session of the SDK.
func connect(t *testing.T, opts *pysbmcp.Options) (*sdk.ClientSession, *pysbmcp.Tools) {
	t.Helper()
	sb := sandbox(t)
	server := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	tools := pysbmcp.AddTools(server, sb, opts)
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		tools.Close()
	})
	return cs, tools
}

// connectWith is connect with a sandbox of its own, under testRules plus
// extra rules.
func connectWith(t *testing.T, extra string, opts *pysbmcp.Options) (*sdk.ClientSession, *pysbmcp.Tools) {
	t.Helper()
	sandbox(t) // the data directory
	ctx := context.Background()
	pol, err := policy.Parse(ctx, "", []byte(testRules+extra), &policy.Options{Env: []string{"DATA=" + data}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithPython(python))
	if err != nil {
		t.Fatal(err)
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	tools := pysbmcp.AddTools(server, sb, opts)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
		tools.Close()
		sb.Close()
	})
	return cs, tools
}

// call calls a tool and returns its result; a protocol error fails the test.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: a protocol error: %v", tool, args, err)
	}
	checkOutputSchema(t, cs, tool, res)
	return res
}

var (
	schemaMu sync.Mutex
	schemas  = map[*sdk.ClientSession]map[string]*jsonschema.Resolved{}
)

// checkOutputSchema checks the structured content of res against the output
// schema the server declared for tool.
func checkOutputSchema(t *testing.T, cs *sdk.ClientSession, tool string, res *sdk.CallToolResult) {
	t.Helper()
	if res.StructuredContent == nil {
		return
	}
	schemaMu.Lock()
	defer schemaMu.Unlock()
	m := schemas[cs]
	if m == nil {
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m = map[string]*jsonschema.Resolved{}
		for _, tl := range lt.Tools {
			b, _ := json.Marshal(tl.OutputSchema)
			var s jsonschema.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("%s: output schema: %v", tl.Name, err)
			}
			r, err := s.Resolve(nil)
			if err != nil {
				t.Fatalf("%s: output schema: %v", tl.Name, err)
			}
			m[tl.Name] = r
		}
		schemas[cs] = m
	}
	b, _ := json.Marshal(res.StructuredContent)
	var v any
	json.Unmarshal(b, &v)
	if err := m[tool].Validate(v); err != nil {
		t.Errorf("%s: the structured content does not follow the output schema: %v\n%s", tool, err, b)
	}
}

// textOf returns the text content of a result.
func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes the structured content of res into v.
func structured(t *testing.T, res *sdk.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// waitGone waits until pid is no longer a live process (killed and reaped, or
// a zombie about to be), and fails the test after 15 s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("no pid")
	}
	deadline := time.Now().Add(15 * time.Second)
	for proctest.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidFrom waits for the next pid on a channel.
func pidFrom(t *testing.T, pids <-chan int) int {
	t.Helper()
	select {
	case pid := <-pids:
		return pid
	case <-time.After(30 * time.Second):
		t.Fatal("the program never started")
	}
	return 0
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(b)
}
