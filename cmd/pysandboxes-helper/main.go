// Command pysandboxes-helper is the supervisor of sandboxed programs, as a small
// binary of its own. By default pysandboxes re-executes the host binary as the
// supervisor; a host whose binary is large, or slow to initialise, starts programs
// faster with pysandboxes.WithHelper pointing at this binary.
//
// It does nothing when run by hand.
package main

import (
	"fmt"
	"os"

	_ "github.com/pysandboxes/pysandboxes/internal/supervise"
)

func main() {
	fmt.Fprintln(os.Stderr, "pysandboxes-helper: the supervisor of sandboxed programs; pysandboxes starts it (see pysandboxes.WithHelper)")
	os.Exit(2)
}
