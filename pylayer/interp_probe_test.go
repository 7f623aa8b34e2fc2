package pylayer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
)

// TestInterpreterProbeConfined: each real interpreter is asked about itself
// (not the disk cache: the cache directory is the test's) and answers, confined.
func TestInterpreterProbeConfined(t *testing.T) {
	if ok, why := hostprobe.Confined(); !ok {
		t.Skipf("probes cannot be confined here: %s", why)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	n := 0
	for _, py := range []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"} {
		real, err := filepath.EvalSymlinks(py)
		if err != nil {
			continue
		}
		n++
		key, err := fileKey(real)
		if err != nil {
			t.Fatal(err)
		}
		info, err := interpInfo(context.Background(), real, key)
		if err != nil {
			t.Errorf("%s: %v", py, err)
			continue
		}
		if info.Version[0] != 3 || len(info.Stdlib) == 0 || info.Executable == "" {
			t.Errorf("%s answered %+v", py, info)
		}
	}
	if n == 0 {
		t.Skip("no Python interpreter found")
	}
}

// TestUnknownShimProbedConfined: a script named python3 that no version manager
// made (package shim cannot resolve it) is run once to ask for sys.executable,
// confined: its own command (a write) fails, and the interpreter it starts is
// found. Where probes cannot be confined it is refused (its directory is
// writable by others), and never runs.
func TestUnknownShimProbedConfined(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	mark := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "python3")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+mark+" 2>/dev/null\nexec /usr/bin/python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := ResolveInterpreter(context.Background(), script)
	if ok, why := hostprobe.Confined(); !ok {
		if !errors.Is(err, hostprobe.ErrUntrusted) {
			t.Fatalf("without confinement (%s): got %v, want a refusal", why, err)
		}
	} else if err != nil {
		t.Fatalf("resolve: %v", err)
	} else if want, _ := filepath.EvalSymlinks("/usr/bin/python3"); in.Path != want {
		t.Errorf("resolved to %s, want %s", in.Path, want)
	}
	if _, err := os.Lstat(mark); err == nil {
		t.Error("the shim wrote on the host")
	}
}
