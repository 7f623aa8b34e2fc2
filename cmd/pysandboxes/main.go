// Command pysandboxes validates rule files, runs commands under a policy, and
// reports what the OS providers of this host can enforce.
//
//	pysandboxes check [FILE]
//	pysandboxes run [--config FILE] [--os-sandbox NAME] [--RULE=VALUE ...] -- CMD [ARGS...]
//	pysandboxes probe
package main

import (
	"context"
	"os"

	"github.com/pysandboxes/pysandboxes/internal/cli"
	_ "github.com/pysandboxes/pysandboxes/landlock"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
