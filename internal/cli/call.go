package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

// Exit codes of pysandboxes call.
const (
	ExitCallRaised = 1 // the function raised
	ExitCallFailed = 3 // the sandbox, the worker or the transport failed
)

type callOptions struct {
	commonOptions
	paths   []string
	dir     string
	init    string
	timeout time.Duration
	learn   *string
	fn      string
	args    []any
}

func callCommand(o *callOptions) *command {
	return &command{
		name:     "call",
		synopsis: "[OPTIONS] [--RULE=VALUE ...] MODULE:FUNC [JSON-ARG ...]",
		summary:  "call a Python function in a sandboxed worker, print its result as JSON",
		about: `Calls the Python function MODULE:FUNC in a sandboxed worker under the policy of a
rule file (default: the one found from the working directory) plus the rules given
on the command line, and prints its result as JSON on standard output.

Each JSON-ARG is one positional argument, a JSON text: null -> None, true/false ->
bool, integers -> int (any size), other numbers -> float, strings -> str, arrays ->
list, objects -> dict. The result prints bytes as base64, tuples and sets as
arrays, big ints as numbers, dicts with other than string keys as [key, value]
pairs, dates and times in ISO 8601, a timedelta as seconds.

What the function prints goes to standard output and error as it is printed,
before the result.

With --learn, nothing is enforced: what the function does (files, imports, network,
environment, sensitive calls) is recorded, and the rules are merged into FILE (default:
the rule file, or ./.py-sandboxes) when the call ends, for review. A missing rule
file is then started from the built-in template. A rule file holding learn=false
refuses it.
`,
		options: o.commonOpts(true,
			&option{name: "path", arg: "DIR", complete: valueDir,
				help: "put DIR first on the worker's sys.path (repeatable; the policy must expose it)",
				set:  func(v string) error { o.paths = append(o.paths, v); return nil }},
			&option{name: "dir", arg: "DIR", complete: valueDir, help: "the worker's working directory",
				set: func(v string) error { o.dir = v; return nil }},
			&option{name: "init", arg: "MODULE:FUNC", help: "a function the worker runs once it has started",
				set: func(v string) error { o.init = v; return nil }},
			&option{name: "timeout", arg: "DURATION", help: "give up the call after DURATION (e.g. 30s); the worker is killed",
				set: func(v string) (err error) { o.timeout, err = parseDuration(v); return err }},
			&option{name: "learn", arg: "FILE", optional: true, complete: valueFile,
				help: "learn the rules instead of enforcing them, into FILE (default: the rule file)",
				set:  func(v string) error { o.learn = &v; return nil }},
		),
		rules: true,
		exits: []exitCode{
			{"0", "the result was printed"},
			{"1", "the function raised (the class, message and remote traceback are printed on standard " +
				"error; a refusal of the sandbox says so and names the rule)"},
			{"2", "a bad command line (an unknown option or rule, a bad value, an argument that is not JSON)"},
			{"3", "the sandbox or the worker failed (bad rules, refused policy, crash, timeout, a result " +
				"that cannot be decoded, learning could not write its file)"},
		},
	}
}

// parseCallOperands reads MODULE:FUNC and the JSON arguments.
func (o *callOptions) parseCallOperands(operands []string) error {
	if len(operands) == 0 {
		return usagef("no function given (MODULE:FUNC)")
	}
	o.fn = operands[0]
	if !strings.Contains(o.fn, ":") {
		return usagef("function %q: expected MODULE:FUNC, such as json:dumps", o.fn)
	}
	for k, a := range operands[1:] {
		v, err := transport.ParseJSON([]byte(a))
		if err != nil {
			return usagef("argument %d %s: not JSON: %s", k+1, quoteArg(a), jsonReason(err))
		}
		o.args = append(o.args, v)
	}
	return o.check()
}

// jsonReason is what a transport.ParseJSON error says, without the package's
// prefix.
func jsonReason(err error) string {
	return strings.TrimPrefix(err.Error(), "transport: json: ")
}

func quoteArg(s string) string {
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func call(ctx context.Context, args []string, env *Env) int {
	o := &callOptions{}
	c := callCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	if err := o.parseCallOperands(p.operands); err != nil {
		return usageFailure(env, c, err)
	}
	o.rules = p.rules
	log, _ := newLogger(env.Stderr, "pysandboxes call", o.verbose)
	pol, learnFile, err := o.loadCallPolicy(ctx, env, log)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n", err)
		return ExitCallFailed
	}
	sbOpts := o.sandboxOptions(log, pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: env.Stdout, Stderr: env.Stderr}))
	if len(o.paths) > 0 {
		sbOpts = append(sbOpts, pysandboxes.WithCall(pysandboxes.CallConfig{PythonPath: o.paths}))
	}
	if o.dir != "" {
		sbOpts = append(sbOpts, pysandboxes.WithCall(pysandboxes.CallConfig{Dir: o.dir}))
	}
	if o.init != "" {
		sbOpts = append(sbOpts, pysandboxes.WithCall(pysandboxes.CallConfig{Init: o.init}))
	}
	learnsInto := learnFile
	if learnFile != "" {
		sbOpts = append(sbOpts, pysandboxes.WithLearning(learnFile))
	} else if f, _ := pol.Learn(); f != "" {
		learnsInto = f // learn=FILE in the rules
	}
	if learnsInto != "" {
		fmt.Fprintf(env.Stderr, "pysandboxes call: learning mode: nothing is enforced; what the call does is recorded, "+
			"and the rules will be written to %s when it ends (review them, then call again to enforce)\n", learnsInto)
	}
	sb, err := pysandboxes.New(ctx, pol, sbOpts...)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n", err)
		return ExitCallFailed
	}
	copts := pysandboxes.CallOptions{Timeout: o.timeout}
	result, err := sb.CallWith(ctx, o.fn, copts, o.args...)
	closeErr := sb.Close()
	if lr := sb.Learned(); lr != nil {
		fmt.Fprintln(env.Stderr, lr.Message)
	}
	if err != nil {
		return callFailure(env, err)
	}
	if closeErr != nil && learnsInto != "" {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n", closeErr)
		return ExitCallFailed
	}
	out, err := transport.JSON(result)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %s returned a value that cannot be printed: %v\n", o.fn, err)
		return ExitCallFailed
	}
	fmt.Fprintf(env.Stdout, "%s\n", out)
	return ExitOK
}

// loadCallPolicy loads the policy, and with --learn the file to learn into
// (absolute): the one named, else the rule file, else ./.py-sandboxes. Learning
// with no rule file starts from the built-in template, as python-sb does.
func (o *callOptions) loadCallPolicy(ctx context.Context, env *Env, log *slog.Logger) (*policy.Policy, string, error) {
	hint := "name one with --config FILE, use --no-config to call with the rules of the command line only, or --learn to learn one"
	if o.learn == nil {
		pol, err := o.loadPolicy(ctx, env, log, hint)
		return pol, "", err
	}
	popts := &policy.Options{Rules: o.rules, Env: env.environ(), Logger: log, Learn: true}
	file := o.config
	if !o.noConfig && file == "" {
		file, _ = policy.Discover(policy.Discovery{})
	}
	var pol *policy.Policy
	var err error
	switch {
	case o.noConfig:
		pol, err = policy.Parse(ctx, "", nil, popts)
	default:
		pol, err = policy.Load(ctx, file, popts)
		var me *policy.MissingError
		if errors.As(err, &me) {
			if o.config != "" {
				// A file named that does not exist is a typo, never a reason to learn.
				return nil, "", fmt.Errorf("--config %s: %w", o.config, err)
			}
			pol, err = policy.Parse(ctx, file, []byte(policy.Template()), popts)
		}
	}
	if err != nil {
		return nil, "", err
	}
	learnFile := *o.learn
	if learnFile == "" {
		learnFile = file
	}
	if learnFile == "" {
		learnFile = policy.DefaultName
	}
	if !filepath.IsAbs(learnFile) {
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", err
		}
		learnFile = filepath.Join(wd, learnFile)
	}
	return pol, learnFile, nil
}

// callFailure prints the error of a call and returns the exit status.
func callFailure(env *Env, err error) int {
	var re *pysandboxes.RemoteError
	var we *pysandboxes.WorkerError
	if errors.As(err, &re) && !errors.As(err, &we) {
		// The remote traceback ends with the exception line.
		if tb := strings.TrimRight(re.Traceback, "\n"); tb != "" {
			fmt.Fprintln(env.Stderr, tb)
		} else {
			fmt.Fprintf(env.Stderr, "%s: %s\n", re.Class(), re.Message)
		}
		for _, d := range re.Denials {
			rule := d.Rule
			switch {
			case rule == "":
				rule = "DENIED by implicit default policy"
			case d.Ref != "":
				rule = d.Ref + ": " + rule
			}
			fmt.Fprintf(env.Stderr, "pysandboxes call: denied by the sandbox (%s): %s\n", rule, d)
		}
		return ExitCallRaised
	}
	fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n", err)
	return ExitCallFailed
}
