package pysandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// TestCallOutputStreamsInOrder: what the function prints on stdout and stderr
// reaches the call's writers in the order it was printed, before the call
// returns; output outside calls goes to the sandbox's writers.
func TestCallOutputStreamsInOrder(t *testing.T) {
	def := &syncBuffer{}
	sb := callSandbox(t, "landlock", "", pysandboxes.WithCall(pysandboxes.CallConfig{Init: "callmod:init"}), pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: def, Stderr: def}))
	var both bytes.Buffer
	_, err := sb.CallWith(context.Background(), "callmod:talk", pysandboxes.CallOptions{Stdout: &both, Stderr: &both}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := "out 0\nerr 0\nout 1\nerr 1\nout 2\nerr 2\n"
	if both.String() != want {
		t.Errorf("interleaved output %q, want %q", both.String(), want)
	}
	var out, errb bytes.Buffer
	if _, err := sb.CallWith(context.Background(), "callmod:talk", pysandboxes.CallOptions{Stdout: &out, Stderr: &errb}, 2); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out 0\nout 1\n" || errb.String() != "err 0\nerr 1\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
	if def.String() != "init ran\n" {
		t.Errorf("the sandbox's writers got %q, want only the init function's output", def.String())
	}
	// Without writers of its own, a call prints to the sandbox's.
	mustCall(t, sb, "callmod:talk", 1)
	if def.String() != "init ran\nout 0\nerr 0\n" {
		t.Errorf("default output %q", def.String())
	}
	// Large output is split in frames and arrives whole.
	var large bytes.Buffer
	if _, err := sb.CallWith(context.Background(), "callmod:shout", pysandboxes.CallOptions{Stdout: &large}, 300_000); err != nil {
		t.Fatal(err)
	}
	if large.Len() != 300_000 || strings.Trim(large.String(), "x") != "" {
		t.Errorf("large output: %d bytes", large.Len())
	}
}

// notifyWriter signals its first write.
type notifyWriter struct {
	first chan string
}

func (n *notifyWriter) Write(p []byte) (int, error) {
	select {
	case n.first <- string(p):
	default:
	}
	return len(p), nil
}

// TestCallOutputIsLive: a line printed while the function still runs reaches
// the host before the call ends.
func TestCallOutputIsLive(t *testing.T) {
	sb := callSandbox(t, "landlock", "")
	w := &notifyWriter{first: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		_, err := sb.CallWith(context.Background(), "callmod:print_then_wait", pysandboxes.CallOptions{Stdout: w}, 1)
		done <- err
	}()
	select {
	case s := <-w.first:
		if s != "started" {
			t.Errorf("first output %q", s)
		}
	case err := <-done:
		t.Fatalf("the call ended (%v) before its output arrived", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no output")
	}
	select {
	case <-done:
		t.Error("the call ended with its first line")
	default:
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestCallOutputLimit: Limits.Output bounds each call's output; past it the
// worker is killed and replaced.
func TestCallOutputLimit(t *testing.T) {
	sb := callSandbox(t, "landlock", "", pysandboxes.WithLimits(pysandboxes.Limits{Output: 100_000}))
	pid := workerPid(t, sb)
	_, err := sb.CallWith(context.Background(), "callmod:shout", pysandboxes.CallOptions{Stdout: &bytes.Buffer{}}, 1_000_000)
	if !errors.Is(err, pysandboxes.ErrOutputLimit) {
		t.Fatalf("shout = %v", err)
	}
	waitGone(t, 5*time.Second, pid)
	if p := workerPid(t, sb); p == pid {
		t.Error("the worker was not replaced")
	}
}
