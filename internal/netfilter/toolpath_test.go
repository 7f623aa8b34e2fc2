package netfilter

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// plantTools writes, in a directory put first on PATH (as a sandboxed program
// could in a virtualenv's bin/ exposed read-write), a script for each name that
// leaves a file behind when run; ran reports whether one did.
func plantTools(t *testing.T, names ...string) (bin string, ran func() []string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "venv", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		script := "#!/bin/sh\necho planted > '" + filepath.Join(dir, name+".ran") + "'\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, name := range names {
		if p, err := exec.LookPath(name); err != nil || p != filepath.Join(bin, name) {
			t.Fatalf("exec.LookPath finds %s, %v: the test plants nothing", p, err)
		}
	}
	return bin, func() []string {
		var r []string
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(dir, name+".ran")); !errors.Is(err, os.ErrNotExist) {
				r = append(r, name)
			}
		}
		return r
	}
}

// systemTool returns the first system directory's name, "" when none has it.
func systemTool(name string) string {
	for _, d := range systool.SystemDirs() {
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && st.Mode().IsRegular() {
			return filepath.Join(d, name)
		}
	}
	return ""
}

// TestPlantedToolsNotRun: with sleep and slirp4netns planted first on PATH, the
// unprivileged probe runs the system's sleep in its namespaces, and slirp4netns
// is the system's.
func TestPlantedToolsNotRun(t *testing.T) {
	_, ran := plantTools(t, "sleep", "slirp4netns")
	if want := systemTool("slirp4netns"); want != "" {
		if got, err := lookSlirp(systool.Finder{}); err != nil || got != want {
			t.Errorf("lookSlirp = %q, %v; want %s", got, err, want)
		}
	}
	if systemTool("sleep") == "" {
		t.Skip("no sleep in the system directories")
	}
	// Whether the helper then works here (cgo, user namespaces) does not
	// matter: sleep is started first.
	err := probeUnprivileged(t.Context(), systool.Finder{})
	t.Logf("probeUnprivileged: %v", err)
	if errors.Is(err, systool.ErrNotFound) || errors.Is(err, systool.ErrUnsafe) {
		t.Fatalf("sleep not found: %v", err)
	}
	if r := ran(); len(r) > 0 {
		t.Fatalf("the planted %v ran", r)
	}
}

// TestMissingTools: without slirp4netns or sleep (none in the system
// directories, none on PATH), Available says how to install slirp4netns and
// the unprivileged probe says sleep is missing.
func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	none := systool.Finder{System: []string{t.TempDir()}}
	err := available(t.Context(), none)
	if !errors.Is(err, systool.ErrNotFound) || !strings.Contains(err.Error(), "slirp4netns is not installed (Debian/Ubuntu: apt-get install slirp4netns)") {
		t.Errorf("available: %v", err)
	}
	err = probeUnprivileged(t.Context(), none)
	if !errors.Is(err, systool.ErrNotFound) || !strings.HasPrefix(err.Error(), "probing the unprivileged way: sleep is not installed") {
		t.Errorf("probeUnprivileged: %v", err)
	}
}
