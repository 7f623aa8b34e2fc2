package pysandboxes_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestMain lets the test binary play a host process for the host-death tests: with
// PYSB_TEST_HOST set, it starts the command given in the arguments after "--" in a
// sandbox, prints the program's pid, and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("PYSB_TEST_HOST") == "1" {
		os.Exit(playHost())
	}
	os.Exit(m.Run())
}

func playHost() int {
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	ctx := context.Background()
	sb := newSandbox(ctx, nil)
	cmd := sb.Command(ctx, args[0], args[1:]...)
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Println("start:", err)
		return 1
	}
	time.Sleep(time.Hour)
	return 0
}

// newSandbox makes a subprocess sandbox for a policy granting env FOO=bar and
// accepting that the OS layer enforces nothing else: these tests are about the
// process tree, the environment and the limits, which subprocess does enforce.
func newSandbox(ctx context.Context, t testing.TB, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	pol, err := policy.NewBuilder().Env("FOO", "bar").Build(ctx, &policy.Options{Env: []string{"SECRET=hunter2"}})
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		panic(err)
	}
	opts = append([]pysandboxes.Option{
		pysandboxes.WithProvider("subprocess"),
		pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities &^ (pysandboxes.CapEnv | pysandboxes.CapResourceLimits)),
		pysandboxes.WithLogger(quietLogger()),
	}, opts...)
	sb, err := pysandboxes.New(ctx, pol, opts...)
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		panic(err)
	}
	return sb
}
