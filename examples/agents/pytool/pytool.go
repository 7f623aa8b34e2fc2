// Package pytool is the sandboxed Python tool the agent samples give their
// models: two tools, eval_python and run_python, whose results are written for
// a model to act on.
//
//   - eval_python evaluates an expression (mode "eval") or statements (mode
//     "exec") with the root package's Sandbox.Eval and Sandbox.Exec, under the
//     eval-* sub-language of the policy: the value comes back as JSON; a source
//     outside the sub-language is rejected before it runs, with each violation
//     and the rule line that would allow it; a budget stops a runaway loop.
//   - run_python runs a short program with Sandbox.Python under both layers (the
//     OS provider and the Python layer), in a directory of data exposed read-only:
//     its output and exit code come back, with each refusal of the sandbox, the
//     rule that refused it named.
//
// A rejection or a refusal is a tool result marked as an error, never a Go
// error: the model reads why, and can write code the policy allows, or say
// which rule it would need. Only a failure of the sandbox itself (it could not
// start a process) is returned as a Go error.
package pytool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes"
	_ "github.com/pysandboxes/pysandboxes/bwrap" // the OS providers os-sandbox=auto chooses from
	"github.com/pysandboxes/pysandboxes/evalguard"
	_ "github.com/pysandboxes/pysandboxes/firejail"
	_ "github.com/pysandboxes/pysandboxes/landlock"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
	_ "github.com/pysandboxes/pysandboxes/unshare"
)

// The names of the tools, as the model sees them.
const (
	EvalName = "eval_python"
	RunName  = "run_python"
)

// Descriptions of the tools, for the model.
const (
	EvalDescription = "Evaluate Python in a sandbox and return its value as JSON. " +
		"mode \"eval\" (default) takes one expression; mode \"exec\" takes statements and returns the names they bound. " +
		"The variable `orders` holds the orders as [name, quantity, unit_price] rows. " +
		"Only a sub-language is allowed (arithmetic, comparisons, comprehensions, subscripts, assignments, loops; " +
		"the builtins len, sum, sorted, min, max, range, round): code outside it is rejected before it runs, " +
		"with each violation and the rule line that would allow it."
	RunDescription = "Run a short Python program in a sandbox and return its stdout, stderr and exit code. " +
		"The working directory holds orders.csv (columns name,quantity,unit_price), read-only. " +
		"The modules json, csv, math and statistics may be imported; the network, other files and other modules are refused, " +
		"and each refusal is reported with the rule that refused it."
)

// EvalSchema and RunSchema are the JSON schemas of the tools' arguments.
var (
	EvalSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"source": map[string]any{"type": "string", "description": "the Python expression or statements"},
			"mode":   map[string]any{"type": "string", "enum": []string{"eval", "exec"}, "description": "eval (an expression, the default) or exec (statements)"},
		},
		"required": []string{"source"},
	}
	RunSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"code": map[string]any{"type": "string", "description": "the Python program"},
		},
		"required": []string{"code"},
	}
)

// EvalArgs and RunArgs are the tools' arguments, as the model writes them.
type (
	EvalArgs struct {
		Source string `json:"source"`
		Mode   string `json:"mode,omitempty"`
	}
	RunArgs struct {
		Code string `json:"code"`
	}
)

// Result is what a tool hands back to the model: Text, and IsError when the
// code was rejected, refused or failed (the model should change it).
type Result struct {
	Text    string
	IsError bool
}

// Options configure New.
type Options struct {
	// Python is the interpreter ("" is python3, found in PATH).
	Python string
	// Provider is the OS provider ("" is auto).
	Provider string
	// Logger receives the sandbox's warnings (nil discards them).
	Logger *slog.Logger
	// RunTimeout bounds one run_python program (0 is 30 seconds).
	RunTimeout time.Duration
	// MaxOutput bounds each of stdout and stderr returned to the model
	// (0 is 8 KiB); the rest is cut, and the cut said.
	MaxOutput int
}

// Tools holds the sandbox the tools run in, and the data they work on.
type Tools struct {
	sb      *pysandboxes.Sandbox
	dir     string
	names   map[string]any
	timeout time.Duration
	max     int
}

// The data of the samples: (name, quantity, unit price).
var orders = []struct {
	name       string
	qty, price int64
}{{"apples", 3, 12}, {"pears", 5, 8}, {"plums", 2, 30}}

// The policy of the samples: the eval sub-language and its budgets, the modules
// a program may import, and the data directory, read-only. Everything else is
// refused (deny by default).
func buildPolicy(ctx context.Context, dataDir string) (*policy.Policy, error) {
	// Build warns about each builtin eval-call grants: this profile means them.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return policy.NewBuilder().
		Rule("eval-syntax", "arith, compare, comprehension, subscript, assign, loop").
		Rule("eval-call", "len, sum, sorted, min, max, range, round").
		Rule("eval-timeout", "2s").
		Rule("eval-max-iterations", "100000").
		PythonImport("json", "csv", "math", "statistics").
		ExposeRO(dataDir).
		Build(ctx, &policy.Options{Logger: quiet})
}

// New starts the sandbox of the tools. Close releases it.
func New(ctx context.Context, o Options) (*Tools, error) {
	dir, err := os.MkdirTemp("", "pytool-data-")
	if err != nil {
		return nil, err
	}
	t := &Tools{dir: dir, timeout: o.RunTimeout, max: o.MaxOutput}
	if t.timeout <= 0 {
		t.timeout = 30 * time.Second
	}
	if t.max <= 0 {
		t.max = 8 << 10
	}
	var csv strings.Builder
	csv.WriteString("name,quantity,unit_price\n")
	rows := make([]any, 0, len(orders))
	for _, r := range orders {
		fmt.Fprintf(&csv, "%s,%d,%d\n", r.name, r.qty, r.price)
		rows = append(rows, []any{r.name, r.qty, r.price})
	}
	t.names = map[string]any{"orders": rows}
	if err := os.WriteFile(filepath.Join(dir, "orders.csv"), []byte(csv.String()), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	pol, err := buildPolicy(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := []pysandboxes.Option{pysandboxes.WithLogger(logger)}
	if o.Provider != "" {
		opts = append(opts, pysandboxes.WithProvider(o.Provider))
	}
	if o.Python != "" {
		opts = append(opts, pysandboxes.WithPython(o.Python))
	}
	sb, err := pysandboxes.New(ctx, pol, opts...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	t.sb = sb
	return t, nil
}

// Provider names the OS provider the sandbox runs under.
func (t *Tools) Provider() string { return t.sb.Provider().Name() }

// Close stops the sandbox and removes the data directory.
func (t *Tools) Close() error {
	err := t.sb.Close()
	if rerr := os.RemoveAll(t.dir); err == nil {
		err = rerr
	}
	return err
}

// Call runs the tool named name with its arguments as the model wrote them
// (a JSON object). An unknown tool or arguments that do not decode are
// results for the model too.
func (t *Tools) Call(ctx context.Context, name string, args []byte) (Result, error) {
	switch name {
	case EvalName:
		var a EvalArgs
		if err := decode(args, &a); err != nil {
			return Result{Text: fmt.Sprintf("bad arguments for %s: %v", name, err), IsError: true}, nil
		}
		return t.Eval(ctx, a)
	case RunName:
		var a RunArgs
		if err := decode(args, &a); err != nil {
			return Result{Text: fmt.Sprintf("bad arguments for %s: %v", name, err), IsError: true}, nil
		}
		return t.Run(ctx, a)
	}
	return Result{Text: fmt.Sprintf("unknown tool %q: the tools are %s and %s", name, EvalName, RunName), IsError: true}, nil
}

// Eval evaluates the source under the eval profile.
func (t *Tools) Eval(ctx context.Context, a EvalArgs) (Result, error) {
	var (
		v   any
		err error
	)
	switch a.Mode {
	case "", "eval":
		v, err = t.sb.Eval(ctx, a.Source, t.names)
	case "exec":
		var ns map[string]any
		ns, err = t.sb.Exec(ctx, a.Source, t.names)
		if err == nil {
			v = ns
		}
	default:
		return Result{Text: fmt.Sprintf("mode %q: expected eval or exec", a.Mode), IsError: true}, nil
	}
	return evalResult(v, err)
}

// evalResult writes the outcome of an evaluation for the model.
func evalResult(v any, err error) (Result, error) {
	var (
		rej *evalguard.RejectedError
		ie  *evalguard.InterruptedError
		re  *pysandboxes.RemoteError
	)
	switch {
	case err == nil:
		j, err := transport.JSON(v)
		if err != nil {
			return Result{Text: fmt.Sprintf("the value cannot be written as JSON: %v", err), IsError: true}, nil
		}
		return Result{Text: "value: " + string(j)}, nil
	case errors.As(err, &rej):
		var b strings.Builder
		fmt.Fprintf(&b, "rejected before it ran: the code is outside the allowed sub-language (%d violations)\n", len(rej.Violations))
		for _, v := range rej.Violations {
			fmt.Fprintf(&b, "- line %d, col %d: %s\n", v.Line, v.Col, v.Message)
			if v.Fix != "" {
				fmt.Fprintf(&b, "  fix (a rule the operator may add): %s\n", v.Fix)
			} else {
				b.WriteString("  no rule allows it\n")
			}
			if v.Warning != "" {
				fmt.Fprintf(&b, "  warning: %s\n", v.Warning)
			}
		}
		b.WriteString("Rewrite the code within the sub-language.")
		return Result{Text: b.String(), IsError: true}, nil
	case errors.As(err, &ie):
		return Result{Text: fmt.Sprintf("interrupted: the budget %s=%v ran out (%s)", ie.Budget, ie.Limit, ie.Message), IsError: true}, nil
	case errors.As(err, &re):
		var b strings.Builder
		fmt.Fprintf(&b, "failed: %s: %s", re.Class(), re.Message)
		for _, d := range re.Denials {
			b.WriteString("\n")
			writeDenial(&b, d)
		}
		return Result{Text: b.String(), IsError: true}, nil
	}
	return Result{}, err
}

// Run runs the program in a fresh sandboxed interpreter, in the data directory.
func (t *Tools) Run(ctx context.Context, a RunArgs) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	stdout := &capped{max: t.max}
	stderr := &capped{max: t.max}
	cmd := t.sb.Python(ctx, "-c", a.Code)
	cmd.Dir = t.dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var ee *pysandboxes.ExitError
	if err != nil && !errors.As(err, &ee) {
		return Result{}, fmt.Errorf("run_python: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "exit code: %d\n", cmd.ExitCode())
	if ee != nil && ee.Err != nil {
		fmt.Fprintf(&b, "stopped by the sandbox: %v\n", ee.Err)
	}
	fmt.Fprintf(&b, "stdout:\n%s", stdout)
	fmt.Fprintf(&b, "stderr:\n%s", stderr)
	denials := cmd.Denials()
	if len(denials) > 0 {
		b.WriteString("refused by the sandbox:\n")
		for _, d := range denials {
			writeDenial(&b, d)
			b.WriteString("\n")
		}
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n"), IsError: err != nil || len(denials) > 0}, nil
}

// writeDenial writes one refusal: what was refused, and the rule that refused
// it (the implicit default policy when no rule of the file did).
func writeDenial(b *strings.Builder, d pysandboxes.Denial) {
	rule := d.Rule
	if rule == "" {
		rule = "the implicit default policy (deny by default)"
	}
	if d.Ref != "" {
		rule += " at " + d.Ref
	}
	fmt.Fprintf(b, "- %s %s refused by rule: %s\n  %s: %s", d.Kind, d.Target, rule, d.Exception, strings.ReplaceAll(d.Message, "\n", " "))
}

// decode reads a tool's arguments; an empty input is an empty object.
func decode(args []byte, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	return jsonUnmarshalStrict(args, v)
}

// capped keeps the first max bytes written to it, and counts the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) <= room {
			c.buf.Write(p)
			return len(p), nil
		}
		c.buf.Write(p[:room])
		c.dropped += int64(len(p) - room)
		return len(p), nil
	}
	c.dropped += int64(len(p))
	return len(p), nil
}

func (c *capped) String() string {
	s := c.buf.String()
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if c.dropped > 0 {
		s += fmt.Sprintf("[%d more bytes cut]\n", c.dropped)
	}
	return s
}
