package needs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/internal/hostprobe/hostiletest"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestMain turns the test binary into a hostile "python3" when started under
// that name (see TestHostilePythonProbedConfined).
func TestMain(m *testing.M) {
	if hostiletest.Is() {
		os.Exit(hostiletest.Main())
	}
	os.Exit(m.Run())
}

// TestHostilePythonProbedConfined: an ELF binary named python3 planted in a
// directory (as a sandboxed program could in a virtual environment's bin/) is
// asked for its directories confined: its answer is read, and its write,
// connection and signal reach nothing. Where probes cannot be confined, it is
// refused (its directory is writable by others), and never runs.
func TestHostilePythonProbedConfined(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	py, check := hostiletest.Plant(t, dir, map[string]any{"paths": []string{"/usr/lib"}, "prefixes": []string{"/usr"},
		"sys_path": []string{}, "site": []string{}})

	var r Resolver
	info, err := r.askPython(context.Background(), py)
	confined, why := hostprobe.Confined()
	switch {
	case confined && err != nil:
		t.Fatalf("probe: %v", err)
	case confined:
		found := false
		for _, n := range info.needs {
			found = found || n.Path == "/usr/lib" && n.Dir
		}
		if !found {
			t.Errorf("the answer was not used: %v", info.needs)
		}
	case !errors.Is(err, hostprobe.ErrUntrusted):
		t.Fatalf("without confinement (%s): got %v, want a refusal", why, err)
	}
	check()
}

// TestRealPythonsProbedConfined: the real interpreters are still asked (not the
// disk cache) and answer their standard library.
func TestRealPythonsProbedConfined(t *testing.T) {
	n := 0
	for _, py := range []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"} {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		n++
		var r Resolver
		info, err := r.askPython(context.Background(), py)
		if err != nil {
			t.Errorf("%s: %v", py, err)
			continue
		}
		found := false
		for _, need := range info.needs {
			if need.Dir && strings.Contains(need.Path, "/lib/python3.") {
				_, serr := os.Stat(filepath.Join(need.Path, "os.py"))
				found = found || serr == nil
			}
		}
		if !found {
			t.Errorf("%s: no standard library in %v", py, paths(info.needs))
		}
	}
	if n == 0 {
		t.Skip("no Python interpreter found")
	}
}

// TestWritableOf: only the expose-rw= directories are writable by the sandbox.
func TestWritableOf(t *testing.T) {
	got := WritableOf([]policy.Expose{{Path: "/usr", Mode: policy.ReadOnly}, {Path: "/srv/app", Mode: policy.ReadWrite}})
	if len(got) != 1 || got[0] != "/srv/app" {
		t.Errorf("got %v", got)
	}
}
