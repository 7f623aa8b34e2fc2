// Package cli implements the pysandboxes command line: check, run, probe and
// call.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// Exit codes of pysandboxes itself.
const (
	ExitOK      = 0
	ExitInvalid = 1   // check: the rule file has errors
	ExitUsage   = 2   // check, probe: bad command line
	ExitSandbox = 125 // run: the sandbox could not start (bad rules, refused policy, bad command line)
	ExitNoExec  = 126 // run: the command exists but cannot be executed
	ExitNoCmd   = 127 // run: the command was not found
)

// Env is the world a command runs in.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv and Environ read the host environment (nil: the process's).
	Environ []string
}

func (e *Env) environ() []string {
	if e.Environ != nil {
		return e.Environ
	}
	return os.Environ()
}

const usage = `Usage: pysandboxes <command> [arguments]

Commands:
  check [FILE]                     validate a rule file (default: ./.py-sandboxes)
  run [OPTIONS] -- CMD [ARGS...]   run a command under a policy
  probe                            show which OS providers work here and what each enforces
  call [OPTIONS] MODULE:FUNC [JSON-ARG ...]
                                   call a Python function in a sandboxed worker, print
                                   its result as JSON
  eval [OPTIONS] SOURCE            evaluate Python code under an eval profile, print
                                   its value as JSON

Run 'pysandboxes <command> -h' for the options of a command.
`

// Main runs the pysandboxes command line and returns its exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "check":
		return check(ctx, args[1:], env)
	case "run":
		return run(ctx, args[1:], env)
	case "probe":
		return probe(ctx, args[1:], env)
	case "call":
		return call(ctx, args[1:], env)
	case "eval":
		return evalCmd(ctx, args[1:], env)
	case "-h", "--help", "help":
		fmt.Fprint(env.Stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(env.Stderr, "pysandboxes: unknown command %q\n\n%s", args[0], usage)
	return ExitUsage
}

// logger returns a text logger on stderr at the level asked.
func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// splitOption splits "--name=value" into name and value; ok reports an "=".
func splitOption(arg string) (name, value string, ok bool) {
	return strings.Cut(strings.TrimPrefix(arg, "--"), "=")
}
