// Command mcpclient is an MCP client that gives model-written Python to
// `pysandboxes mcp` and hands each result back as the model would see it: the
// Go SDK's client starts the server over stdio, lists its tools, then calls
// them with the code a model would write:
//
//   - a computation run_python runs, whose stdout comes back;
//   - an expression eval_python evaluates, whose value comes back as JSON;
//   - an expression outside the eval profile: rejected before it runs, a tool
//     error listing each violation with the rule line that would allow it;
//   - a program that imports a module the policy does not grant, and one that
//     reads a file it does not expose: refused by the sandbox, a tool error
//     naming the rule that refused and the rule line that would allow it;
//   - a loop past the profile's budget: interrupted, naming the budget.
//
// A tool error (isError) is a result the model reads and acts on (it rewrites
// its code), never a failure of the session. The rule lines are for the
// operator of the policy, not the model: the server's instructions say so.
//
//	go run ./examples/mcpclient                  # pysandboxes on PATH
//	go run ./examples/mcpclient -pysandboxes ./pysandboxes
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Rules is the policy the sample serves under, given on the command line
// (--no-config): the modules the code may import, and the eval profile.
var Rules = []string{
	"--python-import=json, math",
	"--eval-syntax=arith, compare, comprehension, subscript",
	"--eval-call=range, sum, len, sorted",
	"--eval-max-iterations=10000",
}

// Step is one call of the model's and what came back.
type Step struct {
	Tool    string
	Args    map[string]any
	IsError bool
	// Text is what the model reads: the JSON of the result, or the report of
	// a tool error (with the fix lines).
	Text string
	// Structured is the structured content (the result's JSON).
	Structured json.RawMessage
}

// Script is what the "model" writes, in turn.
var Script = []struct {
	Tool string
	Args map[string]any
}{
	{"run_python", map[string]any{"code": "import math, json\nprint(json.dumps({'hypot': math.hypot(3, 4)}))"}},
	{"eval_python", map[string]any{"source": "sorted(x * x for x in xs)[-1]", "names": map[string]any{"xs": []int{3, -7, 5}}}},
	{"eval_python", map[string]any{"source": "__import__('os').getcwd()"}},
	{"run_python", map[string]any{"code": "import urllib.request\nurllib.request.urlopen('http://example.com')"}},
	{"run_python", map[string]any{"code": "print(open('/etc/passwd').read())"}},
	{"eval_python", map[string]any{"source": "sum(i for i in range(10**9))"}},
}

// Command is the pysandboxes mcp command line of the sample.
func Command(ctx context.Context, pysandboxes string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, pysandboxes, append([]string{"mcp", "--no-config"}, Rules...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return cmd
}

// Run connects to the server cmd starts and plays the script.
func Run(ctx context.Context, cmd *exec.Cmd, stderr io.Writer) ([]Step, error) {
	cmd.Stderr = stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "mcpclient", Version: "v0.1.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to pysandboxes mcp: %w", err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return nil, err
	}
	var steps []Step
	for _, s := range Script {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: s.Tool, Arguments: s.Args})
		if err != nil {
			// A protocol error: the session is broken, not the code.
			return steps, fmt.Errorf("%s: %w", s.Tool, err)
		}
		st := Step{Tool: s.Tool, Args: s.Args, IsError: res.IsError}
		var parts []string
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		st.Text = strings.Join(parts, "\n")
		if res.StructuredContent != nil {
			st.Structured, _ = json.Marshal(res.StructuredContent)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func main() {
	pysb := flag.String("pysandboxes", "pysandboxes", "the pysandboxes command")
	flag.Parse()
	steps, err := Run(context.Background(), Command(context.Background(), *pysb), os.Stderr)
	for _, s := range steps {
		args, _ := json.Marshal(s.Args)
		kind := "result"
		if s.IsError {
			kind = "tool error"
		}
		fmt.Printf("== %s %s\n-- %s:\n%s\n\n", s.Tool, args, kind, s.Text)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpclient:", err)
		os.Exit(1)
	}
}
