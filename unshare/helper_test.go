package unshare_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helperBinary builds cmd/pysandboxes-helper once (the supervisor as a small
// binary of its own).
func helperBinary(t testing.TB) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build cmd/pysandboxes-helper")
	}
	helperOnce.Do(func() {
		out := filepath.Join(helperDir, "pysandboxes-helper")
		if b, err := exec.Command(gobin, "build", "-o", out, "../cmd/pysandboxes-helper").CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("go build: %v: %s", err, b)
			return
		}
		helperPath = out
	})
	if helperErr != nil {
		t.Fatalf("building the helper: %v", helperErr)
	}
	return helperPath
}

// TestWithHelper: the sandbox works the same when the supervisor is the small
// helper binary rather than the host binary.
func TestWithHelper(t *testing.T) {
	helper := helperBinary(t)
	dir := providertest.TempDir(t)
	providertest.WriteFile(t, filepath.Join(dir, "a.txt"), "alpha")
	sb := sandbox(t, []string{"expose-ro=" + dir}, pysandboxes.WithHelper(helper))
	out, err := sb.Command(context.Background(), "/bin/sh", "-c", `read -r l < "$1/a.txt"; echo "$l"; [ -e /etc/passwd ] || echo absent`, "sh", dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "alpha\nabsent" {
		t.Fatalf("%q, %v", out, err)
	}
}

// BenchmarkUnshareTrueHelper is BenchmarkUnshareTrue with the small helper binary
// as the supervisor.
func BenchmarkUnshareTrueHelper(b *testing.B) {
	providertest.BenchTrueIn(b, sandbox(b, nil, pysandboxes.WithHelper(helperBinary(b))))
}
