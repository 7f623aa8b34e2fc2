package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSample runs the sample end to end against the pysandboxes command built
// from this checkout: each step's result is the one the model must see.
func TestSample(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3: the tools run real Python")
	}
	bin := filepath.Join(t.TempDir(), "pysandboxes")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "github.com/pysandboxes/pysandboxes/cmd/pysandboxes")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("building pysandboxes: %v", err)
	}
	var stderr bytes.Buffer
	steps, err := Run(context.Background(), Command(context.Background(), bin), &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if len(steps) != len(Script) {
		t.Fatalf("%d steps, want %d", len(steps), len(Script))
	}
	want := []struct {
		isError bool
		has     []string
	}{
		// A value from run_python: its stdout.
		{false, []string{`"exit_code":0`, `"stdout":"{\"hypot\": 5.0}\n"`, `"refusals":[]`}},
		// A value from eval_python, as JSON.
		{false, []string{`{"value":49}`}},
		// A rejection: each violation with its fix line, nothing ran.
		{true, []string{"rejects the source", "rule line that would allow it: eval-call=__import__", "rule line that would allow it: eval-attribute=getcwd"}},
		// Refusals: the exception, who refused, the fix line.
		{true, []string{"RuleModuleNotFoundError: Module named 'urllib'", "denied by the implicit default policy", "rule line that would allow it: python-import=urllib"}},
		{true, []string{"RuleFileNotFoundError", "denied by the implicit default policy", "rule line that would allow it: expose-ro=/etc/passwd"}},
		// A budget.
		{true, []string{"interrupted by its budget eval-max-iterations=10000"}},
	}
	for i, w := range want {
		s := steps[i]
		if s.IsError != w.isError {
			t.Errorf("step %d (%s): isError %v, want %v\n%s", i, s.Tool, s.IsError, w.isError, s.Text)
		}
		for _, h := range w.has {
			if !strings.Contains(s.Text, h) {
				t.Errorf("step %d (%s): the text does not hold %q:\n%s", i, s.Tool, h, s.Text)
			}
		}
	}
	// The refusals are structured too: the fix line is a field.
	var run struct {
		Refusals []struct{ Exception, Fix string }
	}
	if err := json.Unmarshal(steps[4].Structured, &run); err != nil || len(run.Refusals) != 1 || run.Refusals[0].Fix != "expose-ro=/etc/passwd" {
		t.Errorf("structured refusals: %s (%v)", steps[4].Structured, err)
	}
}
