// Command agent is an agent runtime that runs model-written Python under a
// stated sub-language: the policy declares what the code may use (its eval
// profile) and how much it may spend, and each "model output" is evaluated in a
// fresh sandboxed process of its own, forked from a warm zygote.
//
// The profile of this example:
//
//	eval-syntax=arith, compare, comprehension, subscript, assign, loop
//	eval-call=len, sum, sorted, min, max, range, round
//	eval-timeout=2s
//	eval-max-iterations=100000
//
// and the model outputs it evaluates, in turn:
//
//   - expressions and statements inside the profile: their value is printed as
//     JSON by transport.JSON (Exec prints the names the statements bound);
//   - a source outside it (an attribute and a call the profile does not grant):
//     rejected before it runs, with every violation and the rule line, ready to
//     paste into a .py-sandboxes file, that would allow it;
//   - a loop past eval-max-iterations: interrupted, naming the budget;
//   - an index out of range: an ordinary Python failure (class: message);
//   - __import__('os') and a frame escape through a generator's gi_frame:
//     rejected; the frame capture is refused by every profile (no rule allows it).
//
// The sandbox's OS provider is chosen by os-sandbox=auto (landlock, unshare,
// bwrap or firejail, whichever works here; all four are linked in):
//
//	go run ./examples/agent
//	go run ./examples/agent -provider landlock
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

func main() {
	provider := flag.String("provider", "auto", "the OS provider (see pysandboxes probe)")
	python := flag.String("python", "", "the Python interpreter (default: python3, resolved)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *provider, *python); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// output is one piece of model-written code: an expression (Eval) or
// statements (Exec).
type output struct {
	exec bool
	src  string
}

// outputs stand in for what a model wrote, evaluated in turn.
var outputs = []output{
	{false, "sum(r[1] * r[2] for r in orders)"},
	{false, "sorted([r[0] for r in orders if r[2] > 10], reverse=True)"},
	{true, "total = 0\nfor name, qty, price in orders:\n    total += qty * price\naverage = round(total / len(orders), 2)\n"},
	{false, "orders.__class__.__name__ + open('/etc/passwd').read()"},
	{false, "len([i for i in range(10**9)])"},
	{false, "orders[10][0]"},
	{false, "__import__('os').system('id')"},
	{false, "[g.gi_frame.f_back.f_globals for g in [(x for x in orders)]]"},
}

func run(ctx context.Context, w io.Writer, provider, python string) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The sub-language the model's code is held to, and its budget. (Build
	// warns about each builtin eval-call grants; this profile means them.)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pol, err := policy.NewBuilder().
		Rule("eval-syntax", "arith, compare, comprehension, subscript, assign, loop").
		Rule("eval-call", "len, sum, sorted, min, max, range, round").
		Rule("eval-timeout", "2s").
		Rule("eval-max-iterations", "100000").
		Build(ctx, &policy.Options{Logger: quiet})
	if err != nil {
		return err
	}
	opts := []pysandboxes.Option{
		pysandboxes.WithProvider(provider),
		pysandboxes.WithLogger(logger),
	}
	if python != "" {
		opts = append(opts, pysandboxes.WithPython(python))
	}
	sb, err := pysandboxes.New(ctx, pol, opts...)
	if err != nil {
		return err
	}
	defer sb.Close()
	fmt.Fprintf(w, "provider: %s\n", sb.Provider().Name())

	// The data the model's code works on: (name, quantity, unit price).
	orders := []any{
		transport.Tuple{"apples", int64(3), int64(12)},
		transport.Tuple{"pears", int64(5), int64(8)},
		transport.Tuple{"plums", int64(2), int64(30)},
	}
	names := map[string]any{"orders": orders}

	for i, o := range outputs {
		fmt.Fprintf(w, "[%d] %s\n", i+1, strings.ReplaceAll(strings.TrimSpace(o.src), "\n", "; "))
		var v any
		if o.exec {
			var ns map[string]any
			ns, err = sb.Exec(ctx, o.src, names)
			if err == nil {
				v = ns
			}
		} else {
			v, err = sb.Eval(ctx, o.src, names)
		}
		if err := report(w, v, err); err != nil {
			return fmt.Errorf("model output %d: %w", i+1, err)
		}
	}
	return nil
}

// report prints the outcome of one evaluation, and returns the errors an agent
// runtime does not hand back to the model (the sandbox itself failed).
func report(w io.Writer, v any, err error) error {
	var (
		rej *evalguard.RejectedError
		ie  *evalguard.InterruptedError
		re  *pysandboxes.RemoteError
	)
	switch {
	case err == nil:
		// transport.JSON converts any value that comes back from Python.
		j, err := transport.JSON(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  value: %s\n", j)
	case errors.As(err, &rej):
		fmt.Fprintln(w, "  rejected:")
		for _, v := range rej.Violations {
			fix := v.Fix
			if fix == "" {
				fix = "(no eval- rule allows it)"
			}
			fmt.Fprintf(w, "    line %d, col %d: %s\n      fix: %s\n", v.Line, v.Col, v.Message, fix)
		}
	case errors.As(err, &ie):
		fmt.Fprintf(w, "  interrupted: %s=%v\n", ie.Budget, ie.Limit)
	case errors.Is(err, pysandboxes.ErrDenied) && errors.As(err, &re):
		d := re.Denials[0]
		fmt.Fprintf(w, "  denied: %s: %s [%s]\n", re.Class(), d.Target, d.Rule)
	case errors.As(err, &re):
		fmt.Fprintf(w, "  failed: %s: %s\n", re.Class(), re.Message)
	default:
		return err
	}
	return nil
}
