package bwrap_test

import (
	"context"
	"fmt"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// A shell under bwrap sees exactly the policy's environment, and nothing of the
// host's /etc but what it needs to run.
func Example() {
	ctx := context.Background()
	pol, err := policy.NewBuilder().Env("GREETING", "hello").Build(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("bwrap"))
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := sb.Command(ctx, "/bin/sh", "-c", `echo "$GREETING"; test -e /etc/passwd || echo "no /etc/passwd"`).Output()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	// Output:
	// hello
	// no /etc/passwd
}
