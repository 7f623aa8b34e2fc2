package pysandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
)

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCallOutputCapturedByDefault: without writers, what a call prints is
// captured: CallOptions.Capture receives it, a RemoteError carries it, and
// none of it reaches the worker processes' own output (where the init
// function's prints and raw writes to descriptors 1 and 2 go); a stream given
// a writer is streamed while the other is captured.
func TestCallOutputCapturedByDefault(t *testing.T) {
	proc := &syncBuffer{}
	sb := callSandboxWith(t, "landlock", "", false, pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:init"}), pysandboxes.WithCall(pysandboxes.CallConfig{ProcessStdout: proc, ProcessStderr: proc}))
	ctx := context.Background()

	var out pysandboxes.Output
	v, err := sb.CallWith(ctx, "callmod:talk", pysandboxes.CallOptions{Capture: &out}, 2)
	if err != nil || v != int64(2) {
		t.Fatalf("talk = %v, %v", v, err)
	}
	if string(out.Stdout) != "out 0\nout 1\n" || string(out.Stderr) != "err 0\nerr 1\n" {
		t.Errorf("captured stdout %q, stderr %q", out.Stdout, out.Stderr)
	}
	mustCall(t, sb, "callmod:talk", 3) // captured, and dropped

	_, err = sb.Call(ctx, "callmod:print_and_raise", "bad")
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || re.Qualname != "ValueError" {
		t.Fatalf("print_and_raise = %v", err)
	}
	if string(re.Output.Stdout) != "before bad\n" || string(re.Output.Stderr) != "warning bad\n" {
		t.Errorf("RemoteError.Output: stdout %q, stderr %q", re.Output.Stdout, re.Output.Stderr)
	}

	var w bytes.Buffer
	out = pysandboxes.Output{}
	if _, err := sb.CallWith(ctx, "callmod:talk", pysandboxes.CallOptions{Stdout: &w, Capture: &out}, 1); err != nil {
		t.Fatal(err)
	}
	if w.String() != "out 0\n" || len(out.Stdout) != 0 || string(out.Stderr) != "err 0\n" {
		t.Errorf("streamed stdout %q; captured stdout %q, stderr %q", w.String(), out.Stdout, out.Stderr)
	}

	// Raw writes to descriptors 1 and 2 are the worker's own output.
	out = pysandboxes.Output{}
	if _, err := sb.CallWith(ctx, "callmod:raw_fd", pysandboxes.CallOptions{Capture: &out}, "x"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "raw output in the worker output", func() bool {
		return strings.Contains(proc.String(), "raw out x\n") && strings.Contains(proc.String(), "raw err x\n")
	})
	if len(out.Stdout)+len(out.Stderr) != 0 {
		t.Errorf("raw writes captured as the call's output: %q, %q", out.Stdout, out.Stderr)
	}
	if got := proc.String(); !strings.HasPrefix(got, "init ran\n") || strings.Contains(got, "out 0") || strings.Contains(got, "before") {
		t.Errorf("the worker output holds %q: only the init function's print and the raw writes belong there", got)
	}
}

// TestCallCaptureOverridesStreaming: a sandbox that streams (CallConfig.Stdout)
// still captures a call that asks for it, and its writers get nothing of it.
func TestCallCaptureOverridesStreaming(t *testing.T) {
	def := &syncBuffer{}
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: def, Stderr: def}))
	var out pysandboxes.Output
	if _, err := sb.CallWith(context.Background(), "callmod:talk", pysandboxes.CallOptions{Capture: &out}, 1); err != nil {
		t.Fatal(err)
	}
	if string(out.Stdout) != "out 0\n" || string(out.Stderr) != "err 0\n" || def.String() != "" {
		t.Errorf("captured %q, %q; the sandbox's writers got %q", out.Stdout, out.Stderr, def.String())
	}
	mustCall(t, sb, "callmod:talk", 1)
	if def.String() != "out 0\nerr 0\n" {
		t.Errorf("streamed %q", def.String())
	}
}

// TestCallCaptureIsBounded: captured output is bounded by DefaultCallOutput
// (Limits.Output when set): past it the call fails with ErrOutputLimit naming
// the bound, its worker is replaced, and the capture holds what came before.
func TestCallCaptureIsBounded(t *testing.T) {
	sb := callSandboxWith(t, "landlock", "", false)
	pid := workerPid(t, sb)
	var out pysandboxes.Output
	_, err := sb.CallWith(context.Background(), "callmod:shout", pysandboxes.CallOptions{Capture: &out}, 3*pysandboxes.DefaultCallOutput)
	if !errors.Is(err, pysandboxes.ErrOutputLimit) || !strings.Contains(err.Error(), "DefaultCallOutput") {
		t.Fatalf("shout = %v", err)
	}
	if n := len(out.Stdout); n > pysandboxes.DefaultCallOutput || n < pysandboxes.DefaultCallOutput/2 || strings.Trim(string(out.Stdout), "x") != "" {
		t.Errorf("captured %d bytes, want at most %d (and most of it)", n, pysandboxes.DefaultCallOutput)
	}
	waitGone(t, 5*time.Second, pid)
	if p := workerPid(t, sb); p == pid {
		t.Error("the worker was not replaced")
	}

	sb = callSandboxWith(t, "landlock", "", false, pysandboxes.WithLimits(pysandboxes.Limits{Output: 10_000}))
	out = pysandboxes.Output{}
	_, err = sb.CallWith(context.Background(), "callmod:shout", pysandboxes.CallOptions{Capture: &out}, 20_000)
	if !errors.Is(err, pysandboxes.ErrOutputLimit) || !strings.Contains(err.Error(), "10000 bytes exceeded (Limits.Output)") {
		t.Fatalf("shout with Limits.Output = %v", err)
	}
	if len(out.Stdout) > 10_000 {
		t.Errorf("captured %d bytes past Limits.Output", len(out.Stdout))
	}
}

// printRules lets evaluated code call print.
const printRules = "eval-syntax=arith, compare, assign\neval-call=print\neval-timeout=5s\n"

// TestEvalOutputCapturedByDefault: what an evaluation prints is captured:
// EvalCapture receives it, a RemoteError carries it; EvalOutput streams it;
// the evaluation's output limit bounds it.
func TestEvalOutputCapturedByDefault(t *testing.T) {
	proc := &syncBuffer{}
	sb := evalSandboxWith(t, printRules, false, pysandboxes.WithCall(pysandboxes.CallConfig{ProcessStdout: proc, ProcessStderr: proc}))
	ctx := context.Background()

	var out pysandboxes.Output
	v, err := sb.Eval(ctx, "print('hello', 1) or 7", nil, pysandboxes.EvalCapture(&out))
	if err != nil || v != int64(7) {
		t.Fatalf("Eval = %v, %v", v, err)
	}
	if string(out.Stdout) != "hello 1\n" || len(out.Stderr) != 0 {
		t.Errorf("captured stdout %q, stderr %q", out.Stdout, out.Stderr)
	}

	_, err = sb.Eval(ctx, "print('before') or 1 / 0", nil)
	var re *pysandboxes.RemoteError
	if !errors.As(err, &re) || re.Qualname != "ZeroDivisionError" || string(re.Output.Stdout) != "before\n" {
		t.Fatalf("Eval raising = %v (output %+v)", err, re)
	}

	var w bytes.Buffer
	out = pysandboxes.Output{}
	if _, err := sb.Exec(ctx, "x = print('streamed')", nil, pysandboxes.EvalOutput(&w, nil), pysandboxes.EvalCapture(&out)); err != nil {
		t.Fatal(err)
	}
	if w.String() != "streamed\n" || len(out.Stdout) != 0 {
		t.Errorf("streamed %q, captured %q", w.String(), out.Stdout)
	}

	out = pysandboxes.Output{}
	_, err = sb.Eval(ctx, "print('y' * 10000)", nil, pysandboxes.EvalMaxOutput(4096), pysandboxes.EvalCapture(&out))
	var ie *evalguard.InterruptedError
	if !errors.As(err, &ie) || ie.Budget != "output" || len(out.Stdout) > 4096 {
		t.Fatalf("past the output limit: %v, %d bytes captured", err, len(out.Stdout))
	}
	if got := proc.String(); strings.Contains(got, "hello") || strings.Contains(got, "before") || strings.Contains(got, "yyy") {
		t.Errorf("the zygote's own output holds an evaluation's prints: %q", got)
	}
}

// TestHostStdoutUntouched: a host that speaks a protocol on its standard
// output (an MCP server over stdio) keeps it whole: with the default options,
// no call, evaluation, init function or raw descriptor write of the workers
// writes there; the processes' own output goes to the host's standard error.
func TestHostStdoutUntouched(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	callSandboxWith(t, "landlock", "", false) // skips when landlock does not work here
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PYSB_TEST_HOST=stdio", "PYSB_TEST_CALLDIR="+callDir(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("host: %v\nstdout %q\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if stdout.String() != stdioHostLine {
		t.Errorf("the host's standard output is %q, want only %q\nstderr:\n%s", stdout.String(), stdioHostLine, stderr.String())
	}
	for _, want := range []string{"init ran\n", "raw out x\n", "raw err x\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the host's standard error lacks the workers' own output %q:\n%s", want, stderr.String())
		}
	}
}
