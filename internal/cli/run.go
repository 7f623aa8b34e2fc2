package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/bytesize"
)

// ExitTimeout is run's exit status when --timeout ended the command.
const ExitTimeout = 124

type runOptions struct {
	commonOptions
	timeout  time.Duration
	limits   pysandboxes.Limits
	keepShim bool
	command  []string
}

func runCommand(o *runOptions) *command {
	dur := func(p *time.Duration) func(string) error {
		return func(v string) (err error) { *p, err = parseDuration(v); return err }
	}
	size := func(p *uint64) func(string) error {
		return func(v string) (err error) { *p, err = bytesize.Parse(v); return err }
	}
	count := func(p *uint64) func(string) error {
		return func(v string) (err error) {
			if *p, err = strconv.ParseUint(v, 10, 64); err != nil {
				return errors.New("expected a whole number")
			}
			return nil
		}
	}
	return &command{
		name:     "run",
		synopsis: "[OPTIONS] [--RULE=VALUE ...] [--] CMD [ARGS...]",
		summary:  "run a command under a policy",
		about: `Runs CMD under the policy of a rule file (default: the .py-sandboxes found from the
working directory) plus the rules given on the command line, and exits with CMD's exit
status. The options end at "--" or at CMD, whichever comes first: what follows is CMD's.

A CMD that is a version manager's shim (pyenv's python3 on PATH) cannot run inside
the sandbox, which does not hold the manager's files: run names the executable the
shim would run, found without running the shim, and runs it instead, or refuses
when it cannot be found that way (--keep-shim runs the shim itself).
`,
		options: o.commonOpts(false,
			&option{name: "timeout", arg: "DURATION", help: "kill the whole process tree after DURATION (e.g. 30s)", set: dur(&o.timeout)},
			&option{name: "limit-cpu", arg: "DURATION", help: "CPU time per process", set: dur(&o.limits.CPUTime)},
			&option{name: "limit-as", arg: "SIZE", help: "address space per process (e.g. 512M)", set: size(&o.limits.AddressSpace)},
			&option{name: "limit-nofile", arg: "N", help: "open files per process", set: count(&o.limits.OpenFiles)},
			&option{name: "limit-nproc", arg: "N", help: "processes of the user (not applied to root by the kernel)", set: count(&o.limits.Processes)},
			&option{name: "limit-fsize", arg: "SIZE", help: "size of a written file", set: size(&o.limits.FileSize)},
			&option{name: "limit-output", arg: "SIZE", help: "bytes of output (stdout and stderr together)", set: func(v string) error {
				n, err := bytesize.Parse(v)
				o.limits.Output = int64(min(n, 1<<62))
				return err
			}},
			flag("keep-shim", "", "run a version manager's shim as CMD as it is, not the executable it would run", &o.keepShim),
		),
		rules:        true,
		firstOperand: valueCommand,
		operands:     valueFile,
		exits: []exitCode{
			{"N", "CMD's exit status; 128+N when signal N ended it"},
			{"2", "a bad command line (an unknown option or rule, a bad value, no CMD)"},
			{"124", "--timeout ended CMD"},
			{"125", "the sandbox could not start: the rules have errors, no provider here enforces them, or the rule file was not found"},
			{"126", "CMD cannot be executed, or is a version manager's shim whose executable cannot be found without running it"},
			{"127", "CMD was not found"},
		},
	}
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, err2 := strconv.ParseUint(s, 10, 32); err2 == nil {
			return time.Duration(n) * time.Second, nil
		}
		return 0, errors.New("expected a duration such as 30s or 1m30s")
	}
	if d <= 0 {
		return 0, errors.New("expected a positive duration")
	}
	return d, nil
}

func run(ctx context.Context, args []string, env *Env) int {
	o := &runOptions{}
	c := runCommand(o)
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	switch {
	case len(p.operands) == 0:
		return usageFailure(env, c, usagef("no command given (pysandboxes run [OPTIONS] -- CMD [ARGS...])"))
	}
	if err := o.check(); err != nil {
		return usageFailure(env, c, err)
	}
	o.rules, o.command = p.rules, p.operands
	if !o.keepShim {
		cmd, err := unshim(env, o.command)
		if err != nil {
			fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n", err)
			return ExitNoExec
		}
		o.command = cmd
	}
	log, _ := newLogger(env.Stderr, "pysandboxes run", o.verbose)
	pol, err := o.loadPolicy(ctx, env, log, "name one with --config FILE, or use --no-config to run with the rules of the command line only")
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n", err)
		return ExitSandbox
	}
	if file, r := pol.Learn(); file != "" {
		// Learning enforces nothing, and only the Python layer learns: run would
		// run CMD unconfined and learn nothing.
		fmt.Fprintf(env.Stderr, "pysandboxes run: %s: '%s' asks for learning mode, which enforces nothing; "+
			"run cannot learn (python-sb --learn and pysandboxes call --learn can): remove it to run under the rules\n", r.Ref, r.Raw)
		return ExitSandbox
	}
	sbOpts := o.sandboxOptions(log, pysandboxes.WithLimits(o.limits))
	sb, err := pysandboxes.New(ctx, pol, sbOpts...)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n", err)
		return ExitSandbox
	}
	defer sb.Close()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	cmd := sb.Command(ctx, o.command[0], o.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = env.Stdin, env.Stdout, env.Stderr
	if err := cmd.Start(); err != nil {
		if o.timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The time ran out while the sandbox was starting: the same timeout.
			fmt.Fprintf(env.Stderr, "pysandboxes run: timed out after %v, while the sandbox was starting (%v)\n", o.timeout, err)
			return ExitTimeout
		}
		fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n", err)
		switch {
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
			return ExitNoCmd
		case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR):
			return ExitNoExec
		}
		return ExitSandbox
	}
	stop := cmd.ForwardSignals()
	err = cmd.Wait()
	stop()
	var ee *pysandboxes.ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		switch {
		case errors.Is(ee.Err, context.DeadlineExceeded):
			fmt.Fprintf(env.Stderr, "pysandboxes run: timed out after %v: the process tree was killed\n", o.timeout)
			return ExitTimeout
		case errors.Is(ee.Err, pysandboxes.ErrOutputLimit):
			fmt.Fprintf(env.Stderr, "pysandboxes run: output limit of %d bytes exceeded: the process tree was killed\n", o.limits.Output)
		}
		return ee.ShellCode()
	}
	fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n", err)
	return ExitSandbox
}
