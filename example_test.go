package pysandboxes_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// A policy names what the program may use; New picks a provider that enforces all
// of it, or says which rule nothing here can enforce.
func ExampleNew() {
	ctx := context.Background()
	pol, err := policy.NewBuilder().
		Env("GREETING", "hello").
		Net("ALLOW", "tcp", "127.0.0.1", "8080", "OUT").
		Build(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Only the subprocess provider exists in this example, and it does not filter
	// the network: it refuses rather than run the program less confined than the
	// policy says.
	_, err = pysandboxes.New(ctx, pol, pysandboxes.WithProvider("subprocess"))
	var ue *pysandboxes.UnenforcedError
	if errors.As(err, &ue) {
		for _, r := range ue.Missing {
			if r.Rule != nil {
				fmt.Println(r)
			}
		}
	}
	// Output:
	// <arg>: net=ALLOW|tcp|127.0.0.1|8080|OUT: filtering by host or network (127.0.0.1) (net-hosts)
	// <arg>: net=ALLOW|tcp|127.0.0.1|8080|OUT: filtering TCP by port (tcp-ports)
}

// Commands run like os/exec ones, with exactly the policy's environment.
func ExampleSandbox_Command() {
	ctx := context.Background()
	pol, err := policy.NewBuilder().Env("GREETING", "hello").Build(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// subprocess enforces the environment and the process tree, not the files or
	// the network: say so explicitly.
	sb, err := pysandboxes.New(ctx, pol,
		pysandboxes.WithProvider("subprocess"),
		pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities),
		pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := sb.Command(ctx, "/usr/bin/env").Output()
	fmt.Printf("%s%v\n", out, err)
	// Output:
	// GREETING=hello
	// <nil>
}

// The exit status comes back as an *ExitError, with the shell's 128+signal
// convention available.
func ExampleExitError() {
	ctx := context.Background()
	pol, _ := policy.NewBuilder().Build(ctx, nil)
	sb, err := pysandboxes.New(ctx, pol,
		pysandboxes.WithProvider("subprocess"),
		pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities),
		pysandboxes.WithLogger(quietLogger()))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = sb.Command(ctx, "/bin/sh", "-c", "kill -TERM $$").Run()
	var ee *pysandboxes.ExitError
	if errors.As(err, &ee) {
		fmt.Println(ee, ee.ShellCode())
	}
	// Output: signal: terminated 143
}
