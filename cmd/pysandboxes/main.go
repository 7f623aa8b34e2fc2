// Command pysandboxes validates rule files, runs commands under a policy,
// reports what the OS providers of this host can enforce, calls Python functions
// and evaluates Python source in a sandbox.
//
//	pysandboxes check [--json] [-v] [FILE]
//	pysandboxes run [OPTIONS] [--RULE=VALUE ...] [--] CMD [ARGS...]
//	pysandboxes probe [--json] [-v] [PROVIDER ...]
//	pysandboxes call [OPTIONS] [--learn[=FILE]] [--RULE=VALUE ...] MODULE:FUNC [JSON-ARG ...]
//	pysandboxes eval [OPTIONS] [--RULE=VALUE ...] [--profile NAME] [--exec] SOURCE
//	pysandboxes version (or --version)
//	pysandboxes completion bash|zsh|fish
//
// "pysandboxes COMMAND --help" lists the options of a command and its exit
// status; a bad command line exits 2. Every OS provider of the module is linked
// in: landlock, unshare, bwrap, firejail, qemu (and subprocess, none).
package main

import (
	"context"
	"os"

	"github.com/pysandboxes/pysandboxes/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
