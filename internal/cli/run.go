package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

const runUsage = `Usage: pysandboxes run [OPTIONS] [--RULE=VALUE ...] -- CMD [ARGS...]

Runs CMD under the policy of a rule file (default: ./.py-sandboxes) plus the rules
given on the command line, and exits with CMD's exit status (128+N when signal N
ended it).

Options:
  --config FILE              the rule file
  --no-config                use only the rules of the command line
  --os-sandbox NAME          the OS provider (overrides os-sandbox=; see pysandboxes probe)
  --accept-unenforced CAPS   accept that the OS layer does not enforce these
                             capabilities (comma list, e.g. files-read,net-hosts)
  --timeout DURATION         kill the whole process tree after DURATION (e.g. 30s)
  --limit-cpu DURATION       CPU time per process
  --limit-as SIZE            address space per process (e.g. 512M)
  --limit-nofile N           open files per process
  --limit-nproc N            processes of the user (not applied to root by the kernel)
  --limit-fsize SIZE         size of a written file
  --limit-output SIZE        bytes of output (stdout and stderr together)
  -v, --verbose              debug output on stderr
  --RULE=VALUE               a rule line RULE=VALUE (e.g. --expose-ro=/data,
                             --net='ALLOW|tcp|example.com|443|OUT'); --RULE alone is RULE=

Exit status: CMD's, or 124 after --timeout, 125 when the sandbox could not start,
126 when CMD cannot be executed, 127 when CMD is not found.
`

// ExitTimeout is run's exit status when --timeout ended the command.
const ExitTimeout = 124

type runOptions struct {
	commonOptions
	timeout time.Duration
	limits  pysandboxes.Limits
	command []string
}

// valueOptions are the options of run that take a value.
var valueOptions = map[string]bool{
	"config": true, "os-sandbox": true, "accept-unenforced": true, "timeout": true,
	"limit-cpu": true, "limit-as": true, "limit-nofile": true, "limit-nproc": true,
	"limit-fsize": true, "limit-output": true,
}

func parseRunArgs(args []string) (*runOptions, error) {
	o := &runOptions{}
	i, err := o.parse(args, valueOptions, true, nil, o.set)
	if err != nil {
		return nil, err
	}
	o.command = args[i:]
	if len(o.command) == 0 {
		return nil, errors.New("no command given")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *runOptions) set(name, value string) error {
	var err error
	switch name {
	case "timeout":
		o.timeout, err = parseDuration(value)
	case "limit-cpu":
		o.limits.CPUTime, err = parseDuration(value)
	case "limit-as":
		o.limits.AddressSpace, err = parseSize(value)
	case "limit-nofile":
		o.limits.OpenFiles, err = strconv.ParseUint(value, 10, 64)
	case "limit-nproc":
		o.limits.Processes, err = strconv.ParseUint(value, 10, 64)
	case "limit-fsize":
		o.limits.FileSize, err = parseSize(value)
	case "limit-output":
		var n uint64
		n, err = parseSize(value)
		o.limits.Output = int64(min(n, 1<<62))
	default:
		err = o.commonOptions.set(name, value)
	}
	if err != nil {
		return fmt.Errorf("--%s %q: %v", name, value, err)
	}
	return nil
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

// parseSize reads a byte count with an optional binary suffix K, M, G or T.
func parseSize(s string) (uint64, error) {
	mult := uint64(1)
	t := strings.TrimSuffix(strings.ToUpper(s), "B")
	t = strings.TrimSuffix(t, "I")
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n == 0 || n > (1<<63)/mult {
		return 0, errors.New("expected a positive size such as 4096, 64K or 512M")
	}
	return n * mult, nil
}

func run(ctx context.Context, args []string, env *Env) int {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" {
			fmt.Fprint(env.Stdout, runUsage)
			return ExitOK
		}
	}
	o, err := parseRunArgs(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n\n%s", err, runUsage)
		return ExitSandbox
	}
	log := logger(env.Stderr, o.verbose)
	pol, err := o.loadPolicy(ctx, env, log, "name one with --config FILE, or use --no-config to run with the rules of the command line only")
	if err != nil {
		fmt.Fprintf(env.Stderr, "pysandboxes run: %v\n", err)
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
