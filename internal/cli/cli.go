// Package cli implements the pysandboxes command line: check, run, probe, call,
// eval, diff, mcp, version and shell completion.
//
// Each subcommand is described once (a command: its options, whether it takes
// --RULE=VALUE rule lines, its operands, its exit codes), and that description
// drives its parser, its --help and the shell completion, so the three cannot
// disagree. A bad command line exits 2 (ExitUsage) in every subcommand, with a
// suggestion when an option or rule name is a near miss. What the library logs
// reaches the user through userHandler: "FILE(LINE): warning: ..." lines, each
// printed once.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pysandboxes/pysandboxes/internal/buildinfo"
	"github.com/pysandboxes/pysandboxes/internal/suggest"
)

// Exit codes of pysandboxes itself.
const (
	ExitOK      = 0
	ExitInvalid = 1   // check: the rule file has errors
	ExitUsage   = 2   // every command: a bad command line
	ExitSandbox = 125 // run, eval: the sandbox could not start (bad rules, refused policy)
	ExitNoExec  = 126 // run: the command exists but cannot be executed
	ExitNoCmd   = 127 // run: the command was not found
)

// Env is the world a command runs in.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Environ is the host environment (nil: the process's).
	Environ []string
}

func (e *Env) environ() []string {
	if e.Environ != nil {
		return e.Environ
	}
	return os.Environ()
}

// commands lists the subcommands, as their help and completion describe them.
func commands() []*command {
	return []*command{
		checkCommand(&checkOptions{}),
		runCommand(&runOptions{}),
		probeCommand(&probeOptions{}),
		callCommand(&callOptions{}),
		evalCommand(&evalOptions{}),
		mcpCommand(&mcpOptions{}),
		diffCommand(&diffOptions{}),
		versionCommand(),
		completionCommand(),
	}
}

func usage() string {
	var b strings.Builder
	b.WriteString("Usage: pysandboxes <command> [arguments]\n\nCommands:\n")
	for _, c := range commands() {
		helpLineAt(&b, c.name, c.summary, 14)
	}
	b.WriteString("\nOptions:\n")
	helpLineAt(&b, "--version", "print the version (as pysandboxes version)", 14)
	helpLineAt(&b, "-h, --help", "show this help", 14)
	b.WriteString("\nRun 'pysandboxes <command> --help' for the options and the exit status of a command.\n")
	return b.String()
}

// Main runs the pysandboxes command line and returns its exit code.
func Main(ctx context.Context, args []string, env *Env) int {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage())
		return ExitUsage
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "check":
		return check(ctx, rest, env)
	case "run":
		return run(ctx, rest, env)
	case "probe":
		return probe(ctx, rest, env)
	case "call":
		return call(ctx, rest, env)
	case "eval":
		return evalCmd(ctx, rest, env)
	case "mcp":
		return mcpServe(ctx, rest, env)
	case "diff":
		return diffCmd(ctx, rest, env)
	case "version", "--version":
		return version(rest, env)
	case "completion":
		return completion(rest, env)
	case completeCommand:
		return complete(rest, env)
	case "-h", "--help", "help":
		if len(rest) > 0 && sub == "help" {
			// pysandboxes help run: the help of run.
			return Main(ctx, []string{rest[0], "--help"}, env)
		}
		fmt.Fprint(env.Stdout, usage())
		return ExitOK
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	msg := fmt.Sprintf("pysandboxes: unknown command %q", sub)
	if strings.HasPrefix(sub, "-") {
		msg = fmt.Sprintf("pysandboxes: unknown option %q", sub)
		names = []string{"--version", "--help"}
	}
	if s, ok := suggest.Closest(sub, names); ok {
		msg += "; did you mean " + s + "?"
	}
	fmt.Fprintf(env.Stderr, "%s\nRun 'pysandboxes --help' for the commands.\n", msg)
	return ExitUsage
}

// usageFailure prints a usage error of a subcommand and returns ExitUsage.
func usageFailure(env *Env, c *command, err error) int {
	fmt.Fprintf(env.Stderr, "pysandboxes %s: %v\nRun 'pysandboxes %s --help' for the options.\n", c.name, err, c.name)
	return ExitUsage
}

func version(args []string, env *Env) int {
	c := versionCommand()
	p, code, ok := c.begin(args, env)
	if !ok {
		return code
	}
	switch {
	case len(p.operands) > 0:
		return usageFailure(env, c, usagef("unexpected argument %q", p.operands[0]))
	}
	fmt.Fprintln(env.Stdout, buildinfo.Line("pysandboxes"))
	return ExitOK
}
