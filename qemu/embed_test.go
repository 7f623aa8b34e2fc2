package qemu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestEmbeddedInitUpToDate rebuilds the guest's init from its source, the way
// `go generate ./qemu` does, and checks that the embedded binary is that
// build (the build is reproducible: -trimpath, no build id, no VCS stamp).
func TestEmbeddedInitUpToDate(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot rebuild the guest init")
	}
	out := filepath.Join(t.TempDir(), "guestinit.bin")
	cmd := exec.Command(goBin, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", out, "./internal/guestinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the guest init: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, guestInit) {
		t.Fatalf("qemu/guestinit.bin (%d bytes) is not the build of qemu/internal/guestinit (%d bytes): run `go generate ./qemu`", len(guestInit), len(b))
	}
}
