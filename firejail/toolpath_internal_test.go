package firejail

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// TestProbeRefusesWritablePathDir: a firejail found only in a world-writable
// directory of PATH is refused, not run, and not explained as missing.
func TestProbeRefusesWritablePathDir(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	if err := os.WriteFile(filepath.Join(bin, "firejail"), []byte("#!/bin/sh\necho planted > '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	p := &Provider{tools: systool.Finder{System: []string{t.TempDir()}}}
	err := p.Probe(t.Context())
	var ue *systool.UnsafeError
	if !errors.Is(err, systool.ErrUnsafe) || !errors.As(err, &ue) || ue.Entry != bin || p.Capabilities() != 0 {
		t.Fatalf("got %v, caps %s; want an *UnsafeError naming %s", err, p.Capabilities(), bin)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the planted firejail ran (%v)", err)
	}
}
