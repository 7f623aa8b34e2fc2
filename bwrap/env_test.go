package bwrap_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pysandboxes/pysandboxes"
)

// TestEnvironmentExact: the program sees exactly the policy's variables (values
// with spaces, '=', newlines and non-ASCII kept), not the host's (a secret set in
// the host's environment never reaches it), and none that bwrap or the provider
// would add (PWD, container...).
func TestEnvironmentExact(t *testing.T) {
	t.Setenv("HOST_SECRET", "s3cr3t-do-not-leak")
	sb := sandbox(t, []string{"env=A=1", "env=SPACES=a b  c", "env=EQ=x=y=z", "env=NL=line1\\nline2", "env=UTF=été"})
	out := py(t, sb, "import os, json; print(json.dumps(dict(os.environ)))")
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{}
	for _, kv := range build(t, "env=A=1", "env=SPACES=a b  c", "env=EQ=x=y=z", "env=NL=line1\\nline2", "env=UTF=été").Environ() {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Error("the host's secret leaked")
	}
}

// TestEnvironmentPWDFromPolicy: a PWD the policy sets is the one the program
// sees (bwrap would set its own).
func TestEnvironmentPWDFromPolicy(t *testing.T) {
	sb := sandbox(t, []string{"env=PWD=/policy/value"})
	out := py(t, sb, "import os; print(sorted(os.environ.items()))")
	expectLine(t, out, "[('PWD', '/policy/value')]")
}

// TestEnvironmentNotOnCommandLine: the values of the environment never appear on
// a host process's command line (bwrap reads them from a descriptor).
func TestEnvironmentNotOnCommandLine(t *testing.T) {
	sb := sandbox(t, []string{"env=TOKEN=tok-0123456789-secret"})
	cmd := sb.Command(context.Background(), "/bin/sh", "-c", "read x")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "tok-0123456789-secret") {
			t.Fatalf("process %s shows the value on its command line: %q", e.Name(), b)
		}
	}
}

// TestEnvironmentFromRequest: Sandbox.Python's own variables (the Python layer's)
// reach the program too: the request's environment is what counts.
func TestEnvironmentFromRequest(t *testing.T) {
	sb := sandbox(t, []string{"env=A=1", "python-import=os"}, pysandboxes.WithPython("/usr/bin/python3"))
	out, err := sb.Python(context.Background(), "-c", "import os; print(os.environ.get('A'))").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	expectLine(t, string(out), "1")
}
