package bwrap

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// TestProbeIgnoresPlantedTools: bwrap, slirp4netns and sleep planted in a
// directory first on PATH (as a sandboxed program could in a virtualenv's bin/
// exposed read-write) are never run by the probe, which takes the system's
// bwrap.
func TestProbeIgnoresPlantedTools(t *testing.T) {
	want := ""
	for _, d := range systool.SystemDirs() {
		if st, err := os.Stat(filepath.Join(d, "bwrap")); err == nil && st.Mode().IsRegular() {
			want = filepath.Join(d, "bwrap")
			break
		}
	}
	if want == "" {
		t.Skip("bwrap is not installed in a system directory")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "venv", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	tools := []string{"bwrap", "slirp4netns", "sleep"}
	for _, name := range tools {
		script := "#!/bin/sh\necho planted > '" + filepath.Join(dir, name+".ran") + "'\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if p, err := exec.LookPath("bwrap"); err != nil || p != filepath.Join(bin, "bwrap") {
		t.Fatalf("exec.LookPath finds %s, %v: the test plants nothing", p, err)
	}
	h := probeHost("", systool.Finder{})
	if h.bwrap != want {
		t.Errorf("the probe took %q (%v), want %s", h.bwrap, h.err, want)
	}
	for _, name := range tools {
		if _, err := os.Stat(filepath.Join(dir, name+".ran")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the planted %s ran (%v)", name, err)
		}
	}
}
