package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/pysandboxes/pysandboxes/policy"
)

const checkUsage = `Usage: pysandboxes check [-v] [FILE]

Validates a rule file (default: the .py-sandboxes of the current directory) and its
includes. Prints one line per problem, "FILE(LINE): message", and exits 1 when there
is any; warnings are printed the same way and do not fail the check.
`

func check(ctx context.Context, args []string, env *Env) int {
	var file string
	verbose := false
	for _, a := range args {
		switch {
		case a == "-h" || a == "--help":
			fmt.Fprint(env.Stdout, checkUsage)
			return ExitOK
		case a == "-v" || a == "--verbose":
			verbose = true
		case len(a) > 1 && a[0] == '-':
			fmt.Fprintf(env.Stderr, "pysandboxes check: unknown option %q\n\n%s", a, checkUsage)
			return ExitUsage
		case file != "":
			fmt.Fprintf(env.Stderr, "pysandboxes check: one file at a time (got %q and %q)\n\n%s", file, a, checkUsage)
			return ExitUsage
		default:
			file = a
		}
	}
	if file == "" {
		file, _ = policy.Discover(policy.Discovery{})
	}
	pol, err := policy.Load(ctx, file, &policy.Options{Env: env.environ(), Logger: logger(env.Stderr, verbose)})
	var ce policy.ConfigErrors
	var me *policy.MissingError
	switch {
	case errors.As(err, &ce):
		for _, e := range ce {
			fmt.Fprintln(env.Stdout, e.Error())
		}
		return ExitInvalid
	case errors.As(err, &me):
		fmt.Fprintf(env.Stdout, "%s: rule file not found\n", me.Name)
		return ExitInvalid
	case err != nil:
		fmt.Fprintf(env.Stdout, "%s: %v\n", file, err)
		return ExitInvalid
	}
	for _, w := range pol.Warnings() {
		fmt.Fprintf(env.Stdout, "%s\n", warningLine(w))
	}
	if verbose {
		fmt.Fprintf(env.Stderr, "%s: valid, %d rules\n", file, len(pol.Rules()))
	}
	return ExitOK
}

func warningLine(w policy.Warning) string {
	if where := w.Ref.String(); where != "" {
		return where + ": warning: " + w.Msg
	}
	return "warning: " + w.Msg
}
