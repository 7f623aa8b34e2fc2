package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/internal/bytesize"
	"github.com/pysandboxes/pysandboxes/transport"
)

// Exit codes of pysandboxes eval.
const (
	ExitEvalRejected    = 1
	ExitEvalInterrupted = 3
	ExitEvalRaised      = 4
)

type evalOptions struct {
	commonOptions
	profile string
	exec    bool
	names   map[string]any
	memory  uint64
	source  string
}

func evalCommand(o *evalOptions) *command {
	return &command{
		name:     "eval",
		synopsis: "[OPTIONS] [--RULE=VALUE ...] SOURCE",
		summary:  "evaluate Python code under an eval profile, print its value as JSON",
		about: `Evaluates the Python expression SOURCE (statements with --exec; "-" reads it from
standard input) under the eval profile of a rule file (default: the one found from
the working directory) plus the rules given on the command line, in a sandboxed
process of its own, and prints its value as JSON (with --exec: the names the code
bound, as a JSON object).

The source is checked against the profile's sub-language (eval-syntax, eval-call,
eval-attribute, eval-import, eval-magic), rewritten to charge its budgets, and run
under the OS provider, the Python layer and hard limits: eval-timeout kills the
process even inside a blocking C call; its memory and processor time are bounded.
What the code prints goes to standard output and error as it is printed. A SOURCE
that starts with "-" follows "--": pysandboxes eval -- -1.
`,
		options: o.commonOpts(true,
			&option{name: "profile", arg: "NAME", help: "the eval profile (eval-<key>:NAME= rules; default: the rules without a suffix)",
				set: func(v string) error { o.profile = v; return nil }},
			flag("exec", "", "run statements; print the names they bind", &o.exec),
			&option{name: "names", arg: "JSON", help: "a JSON object: the names the code sees", set: o.setNames},
			&option{name: "memory", arg: "SIZE", help: "address space of the evaluation's process (e.g. 512M)",
				set: func(v string) (err error) { o.memory, err = bytesize.Parse(v); return err }},
		),
		rules: true,
		exits: []exitCode{
			{"0", "the value was printed"},
			{"1", "the profile rejects the source (each violation is printed, then on the next line the rule " +
				"that allows it, ready to paste into the rule file)"},
			{"2", "a bad command line (an unknown option or rule, a bad value, no source, a source that does not parse)"},
			{"3", "a budget or a hard limit interrupted the evaluation (it names which: eval-timeout=..., " +
				"eval-max-iterations=..., memory=..., cpu=..., output=...)"},
			{"4", "the code raised an exception (printed as \"Class: message\"; a refusal of the sandbox names its rule)"},
			{"125", "the sandbox or the evaluation's process failed (bad rules, refused policy, no rule file)"},
		},
	}
}

// readSource reads SOURCE, or standard input for "-".
func (o *evalOptions) readSource(operands []string, stdin io.Reader) error {
	switch {
	case len(operands) == 0:
		return usagef("no source given (SOURCE, or - to read it from standard input)")
	case len(operands) > 1:
		return usagef("one source only (got %d arguments after the options: quote the source)", len(operands))
	case operands[0] == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, pysandboxes.MaxEvalSource+1))
		if err != nil {
			return usagef("reading the source from standard input: %v", err)
		}
		o.source = string(b)
	default:
		o.source = operands[0]
	}
	return o.check()
}

func (o *evalOptions) setNames(value string) error {
	v, err := transport.ParseJSON([]byte(value))
	if err != nil {
		return errors.New(jsonReason(err))
	}
	d, ok := v.(transport.Dict)
	if ok {
		o.names, ok = d.StringMap()
	}
	if !ok {
		return errors.New("not a JSON object")
	}
	return nil
}

func evalCmd(ctx context.Context, args []string, env *Env) int {
	o := &evalOptions{}
	c := evalCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	stdin := env.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if err := o.readSource(p.operands, stdin); err != nil {
		return usageFailure(env, c, err)
	}
	o.rules = p.rules
	log, _ := newLogger(env.Stderr, "pysandboxes eval", o.verbose)
	pol, err := o.loadPolicy(ctx, env, log, "name one with --config FILE, or use --no-config with rules such as --eval-syntax=arith")
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes eval: %v\n", err)
		return ExitSandbox
	}
	sbOpts := o.sandboxOptions(log, pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: env.Stdout, Stderr: env.Stderr}))
	if o.memory > 0 {
		sbOpts = append(sbOpts, pysandboxes.WithEval(pysandboxes.EvalConfig{Limits: pysandboxes.EvalLimits{Memory: o.memory}}))
	}
	sb, err := pysandboxes.New(ctx, pol, sbOpts...)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes eval: %v\n", err)
		return ExitSandbox
	}
	defer sb.Close()
	eopts := []pysandboxes.EvalOption{pysandboxes.EvalProfile(o.profile)}
	var value any
	if o.exec {
		value, err = sb.Exec(ctx, o.source, o.names, eopts...) // a map: JSON sorts its keys
	} else {
		value, err = sb.Eval(ctx, o.source, o.names, eopts...)
	}
	if err != nil {
		return evalFailure(env, err, o.verbose)
	}
	out, err := transport.JSON(value)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes eval: the value cannot be printed: %v\n", err)
		return ExitSandbox
	}
	fmt.Fprintf(env.Stdout, "%s\n", out)
	return ExitOK
}

// evalFailure prints the error of an evaluation and returns the exit status.
func evalFailure(env *Env, err error, verbose bool) int {
	var rej *evalguard.RejectedError
	var ie *evalguard.InterruptedError
	var re *pysandboxes.RemoteError
	var se *evalguard.SourceError
	switch {
	case errors.As(err, &rej):
		if len(rej.Violations) == 0 {
			fmt.Fprintln(env.Stdout, rej.Error())
		}
		for _, v := range rej.Violations {
			where := ""
			if v.Line > 0 {
				where = fmt.Sprintf("%d:%d: ", v.Line, v.Col)
			}
			fmt.Fprintf(env.Stdout, "%s%s\n", where, v.Message)
			if v.Fix != "" {
				fmt.Fprintf(env.Stdout, "    %s\n", v.Fix)
			} else {
				fmt.Fprintf(env.Stdout, "    (no eval- rule allows it)\n")
			}
			if v.Warning != "" {
				fmt.Fprintf(env.Stdout, "    warning: %s\n", v.Warning)
			}
		}
		return ExitEvalRejected
	case errors.As(err, &ie):
		line := ie.Rule()
		fmt.Fprintf(env.Stderr, "pysandboxes eval: interrupted by %s\n", line)
		if m := strings.TrimPrefix(ie.Message, "evaluation interrupted: "); m != "" && m != line+" exhausted" {
			fmt.Fprintf(env.Stderr, "  %s\n", m)
		}
		return ExitEvalInterrupted
	case errors.As(err, &re):
		if verbose {
			if tb := strings.TrimRight(re.Traceback, "\n"); tb != "" {
				fmt.Fprintln(env.Stderr, tb)
			}
		}
		fmt.Fprintf(env.Stderr, "%s: %s\n", re.Class(), re.Message)
		for _, d := range re.Denials {
			rule := d.Rule
			switch {
			case d.Kind == "eval":
				rule = "the eval guard"
			case rule == "":
				rule = "DENIED by implicit default policy"
			case d.Ref != "":
				rule = d.Ref + ": " + rule
			}
			fmt.Fprintf(env.Stderr, "pysandboxes eval: denied by the sandbox (%s): %s\n", rule, d)
		}
		var de *evalguard.DeniedError
		if errors.As(err, &de) && de.Fix != "" {
			fmt.Fprintf(env.Stderr, "pysandboxes eval: the rule that allows it: %s\n", de.Fix)
		}
		return ExitEvalRaised
	case errors.As(err, &se):
		fmt.Fprintf(env.Stderr, "pysandboxes eval: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(env.Stderr, "pysandboxes eval: %v\n", err)
	return ExitSandbox
}
