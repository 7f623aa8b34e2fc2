package pysandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/policy"
)

func pythonSandbox(t *testing.T, rules string, opts ...pysandboxes.Option) *pysandboxes.Sandbox {
	t.Helper()
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	file := dir + "/.py-sandboxes"
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, err := policy.Load(ctx, file, &policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]pysandboxes.Option{pysandboxes.WithProvider("subprocess"), pysandboxes.AcceptUnenforced(pysandboxes.AllCapabilities),
		pysandboxes.WithLogger(quietLogger()), pysandboxes.WithPython("/usr/bin/python3")}, opts...)
	sb, err := pysandboxes.New(ctx, pol, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// TestPythonDenialsReachTheHost: a refusal raised in the child is reported to
// the host with its rule and the rule's file(line).
func TestPythonDenialsReachTheHost(t *testing.T) {
	sb := pythonSandbox(t, "python-import=keyword\nnet=DENY|tcp|10.0.0.0/8|*|OUT\n")
	cmd := sb.Python(context.Background(), "-c", "import keyword\ntry:\n import socket\nexcept ModuleNotFoundError as e:\n print('refused')\nopen('/etc/hostname')")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "refused") {
		t.Fatalf("Run = %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
	ds := cmd.Denials()
	if len(ds) != 2 || ds[0].Kind != "import" || ds[0].Exception != "RuleModuleNotFoundError" || ds[0].Target != "socket" ||
		ds[1].Kind != "file" || !strings.Contains(ds[1].Message, "Access to '/etc/hostname' must be accepted by a rule.") {
		t.Errorf("Denials = %+v", ds)
	}
}

// TestPythonLearningRefusedWhenLocked: learn=false locks the profile.
func TestPythonLearningRefusedWhenLocked(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/.py-sandboxes"
	os.WriteFile(file, []byte("learn=false\n"), 0o644)
	pol, err := policy.Load(context.Background(), file, &policy.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.WithLearning(""), pysandboxes.WithLogger(quietLogger()))
	if !errors.Is(err, policy.ErrLocked) {
		t.Errorf("New with learning on a locked profile = %v", err)
	}
}

// TestPythonLayerOff: py-sandbox=false runs the interpreter under the OS layer
// only (no import whitelist).
func TestPythonLayerOff(t *testing.T) {
	sb := pythonSandbox(t, "py-sandbox=false\n")
	out, err := sb.Python(context.Background(), "-c", "import socket; print('ok')").Output()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("Output = %q, %v", out, err)
	}
}
