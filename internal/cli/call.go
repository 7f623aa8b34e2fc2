package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

const callUsage = `Usage: pysandboxes call [OPTIONS] [--RULE=VALUE ...] MODULE:FUNC [JSON-ARG ...]

Calls the Python function MODULE:FUNC in a sandboxed worker under the policy of a
rule file (default: the one found from the working directory) plus the rules given
on the command line, and prints its result as JSON on standard output.

Each JSON-ARG is one positional argument, a JSON text: null → None, true/false →
bool, integers → int (any size), other numbers → float, strings → str, arrays →
list, objects → dict. The result prints bytes as base64, tuples and sets as
arrays, big ints as numbers, dicts with other than string keys as [key, value]
pairs, dates and times in ISO 8601, a timedelta as seconds.

What the function prints goes to standard output and error as it is printed,
before the result.

Options:
  --config FILE              the rule file
  --no-config                use only the rules of the command line
  --os-sandbox NAME          the OS provider (overrides os-sandbox=; see pysandboxes probe)
  --accept-unenforced CAPS   accept that the OS layer does not enforce these
                             capabilities (comma list, e.g. files-read,net-hosts)
  --python PATH              the Python interpreter (default: PYSANDBOXES_PYTHON,
                             then python3 resolved to the real interpreter)
  --path DIR                 put DIR first on the worker's sys.path (repeatable; the
                             policy must expose it)
  --dir DIR                  the worker's working directory
  --init MODULE:FUNC         a function the worker runs once it has started
  --timeout DURATION         give up the call after DURATION (e.g. 30s); the worker
                             is killed
  -v, --verbose              debug output on stderr
  --RULE=VALUE               a rule line RULE=VALUE (e.g. --expose-ro=/data,
                             --net='ALLOW|tcp|example.com|443|OUT'); --RULE alone is RULE=

Exit status: 0 with the result printed; 1 when the function raised (the class,
message and remote traceback are printed on standard error; a refusal of the
sandbox says so and names the rule); 2 for a bad command line; 3 when the sandbox
or the worker failed (bad rules, refused policy, crash, timeout, a result that
cannot be decoded).
`

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
	fn      string
	args    []any
}

var callValueOptions = map[string]bool{
	"config": true, "os-sandbox": true, "accept-unenforced": true, "python": true,
	"path": true, "dir": true, "init": true, "timeout": true,
}

func parseCallArgs(args []string) (*callOptions, error) {
	o := &callOptions{}
	i, err := o.parse(args, callValueOptions, false, nil, o.set)
	if err != nil {
		return nil, err
	}
	if i >= len(args) {
		return nil, errors.New("no function given (MODULE:FUNC)")
	}
	o.fn = args[i]
	if !strings.Contains(o.fn, ":") {
		return nil, fmt.Errorf("function %q: expected MODULE:FUNC, such as json:dumps", o.fn)
	}
	for k, a := range args[i+1:] {
		v, err := decodeJSONArg(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d %s: not JSON: %v", k+1, quoteArg(a), err)
		}
		o.args = append(o.args, v)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return o, nil
}

func quoteArg(s string) string {
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func (o *callOptions) set(name, value string) error {
	var err error
	switch name {
	case "path":
		o.paths = append(o.paths, value)
	case "dir":
		o.dir = value
	case "init":
		o.init = value
	case "timeout":
		o.timeout, err = parseDuration(value)
	default:
		err = o.commonOptions.set(name, value)
	}
	if err != nil {
		return fmt.Errorf("--%s %q: %v", name, value, err)
	}
	return nil
}

func call(ctx context.Context, args []string, env *Env) int {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		if a == "-h" || a == "--help" {
			fmt.Fprint(env.Stdout, callUsage)
			return ExitOK
		}
	}
	o, err := parseCallArgs(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n\n%s", err, callUsage)
		return ExitUsage
	}
	log := logger(env.Stderr, o.verbose)
	pol, err := o.loadPolicy(ctx, env, log, "name one with --config FILE, or use --no-config to call with the rules of the command line only")
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n", err)
		return ExitCallFailed
	}
	sbOpts := o.sandboxOptions(log, pysandboxes.WithCallOutput(env.Stdout, env.Stderr))
	if len(o.paths) > 0 {
		sbOpts = append(sbOpts, pysandboxes.WithPythonPath(o.paths...))
	}
	if o.dir != "" {
		sbOpts = append(sbOpts, pysandboxes.WithWorkerDir(o.dir))
	}
	if o.init != "" {
		sbOpts = append(sbOpts, pysandboxes.WithInit(o.init))
	}
	sb, err := pysandboxes.New(ctx, pol, sbOpts...)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %v\n", err)
		return ExitCallFailed
	}
	defer sb.Close()
	copts := pysandboxes.CallOptions{Timeout: o.timeout}
	result, err := sb.CallWith(ctx, o.fn, copts, o.args...)
	if err != nil {
		return callFailure(env, err)
	}
	out, err := resultJSON(result)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes call: %s returned a value that cannot be printed: %v\n", o.fn, err)
		return ExitCallFailed
	}
	fmt.Fprintf(env.Stdout, "%s\n", out)
	return ExitOK
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
