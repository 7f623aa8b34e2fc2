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
	switch os.Getenv("PYSB_TEST_HOST") {
	case "1":
		os.Exit(playHost())
	case "stdio":
		os.Exit(playStdioHost())
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

// stdioHostLine is all the stdio host writes on its standard output.
const stdioHostLine = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"only the host speaks here\"}\n"

// playStdioHost plays a host whose standard output is a protocol: it calls
// functions that print (from the init function, in calls, straight to
// descriptors 1 and 2, before raising) and evaluates code that prints, all
// with the default output options, then writes its one protocol line.
func playStdioHost() int {
	ctx := context.Background()
	dir := os.Getenv("PYSB_TEST_CALLDIR")
	pol, err := policy.NewBuilder().ExposeRO(dir).
		Rule("python-import", "asyncio, os, time, datetime, decimal, fractions, uuid, pathlib, ipaddress, collections").
		Rule("eval-syntax", "arith, compare").Rule("eval-call", "print").
		Build(ctx, &policy.Options{Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb, err := pysandboxes.New(ctx, pol, pysandboxes.WithProvider("landlock"), landlockMeta, pysandboxes.WithLogger(quietLogger()),
		pysandboxes.WithPython("/usr/bin/python3"), pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}), pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:init"}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sb.Close()
	for _, c := range []struct {
		fn   string
		args []any
	}{{"callmod:talk", []any{3}}, {"callmod:raw_fd", []any{"x"}}, {"callmod:print_and_raise", []any{"y"}}} {
		if _, err := sb.Call(ctx, c.fn, c.args...); err != nil && c.fn != "callmod:print_and_raise" {
			fmt.Fprintln(os.Stderr, c.fn, err)
			return 1
		}
	}
	if _, err := sb.Eval(ctx, "print('from eval') or 1", nil); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		return 1
	}
	if err := sb.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	fmt.Print(stdioHostLine)
	return 0
}
