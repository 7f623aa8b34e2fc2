package unshare_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestPythonLayerAndCall: both layers run together under unshare: Sandbox.Python
// (the guard injected through the inherited channel descriptor) reports the
// Python layer's refusals, and Sandbox.Call runs a function in a worker confined
// by the provider.
func TestPythonLayerAndCall(t *testing.T) {
	providertest.Require(t, "unshare")
	t.Setenv("XDG_CACHE_HOME", providertest.TempDir(t))
	dir := providertest.TempDir(t)
	providertest.WriteFile(t, dir+"/mod.py", "def add(a, b):\n    return a + b\n")
	sb := sandbox(t, []string{"expose-ro=" + dir, "python-import=mod,os,sys"}, pysandboxes.WithPython("/usr/bin/python3"),
		pysandboxes.WithCall(pysandboxes.CallConfig{Dir: dir}), pysandboxes.WithCall(pysandboxes.CallConfig{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}))
	defer sb.Close()
	cmd := sb.Python(context.Background(), "-c", `
import os
try:
    import socket
except ModuleNotFoundError:
    print("import refused")
try:
    os.listdir("/etc")
except OSError as e:
    print("listdir", type(e).__name__)
print("pid", os.getpid() < 100)
`)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	for _, want := range []string{"import refused", "pid True"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, out.String(), errb.String())
		}
	}
	if len(cmd.Denials()) == 0 {
		t.Error("no denial reached the host")
	}
	got, err := sb.Call(context.Background(), "mod:add", 2, 3)
	var re *pysandboxes.RemoteError
	if errors.As(err, &re) {
		t.Fatalf("call: %v", re)
	}
	if err != nil || got != int64(5) {
		t.Fatalf("Call = %v (%T), %v", got, got, err)
	}
	_ = os.Getpid()
}
