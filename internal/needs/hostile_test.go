package needs

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needsWithin runs Needs on path and fails the test if it takes more than a few
// seconds (a FIFO opened to be read would block forever).
func needsWithin(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		var r Resolver
		_, err := r.Needs(context.Background(), path)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Needs(%s) hangs", path)
		return nil
	}
}

// TestNotAProgram: a FIFO, a device or a directory where a program is expected
// is an error at once, never a read that blocks; so is a FIFO named as a
// script's interpreter.
func TestNotAProgram(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o755); err != nil {
		t.Skip("cannot make a FIFO here:", err)
	}
	for _, p := range []string{fifo, "/dev/null", dir} {
		if err := needsWithin(t, p); err == nil {
			t.Errorf("Needs(%s): no error", p)
		}
	}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!"+fifo+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	needsWithin(t, script) // the interpreter is left out (exec would fail): no hang
}

// TestCompressedDynamicSection: an object whose dynamic section says it is
// compressed (debug/elf would inflate it whole, however large) is not read,
// with an error naming it.
func TestCompressedDynamicSection(t *testing.T) {
	src, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		t.Skip("no /bin/true:", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(src)
	if err != nil {
		t.Skip("/bin/true is not an ELF object here:", err)
	}
	idx := -1
	for i, s := range f.Sections {
		if s.Type == elf.SHT_DYNAMIC {
			idx = i
		}
	}
	f.Close()
	if idx < 0 || f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		t.Skip("/bin/true is not a 64-bit little-endian dynamic object")
	}
	shoff := binary.LittleEndian.Uint64(b[0x28:])
	shentsize := uint64(binary.LittleEndian.Uint16(b[0x3a:]))
	flags := shoff + uint64(idx)*shentsize + 8
	binary.LittleEndian.PutUint64(b[flags:], binary.LittleEndian.Uint64(b[flags:])|uint64(elf.SHF_COMPRESSED))
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := readELF(bad); err == nil || !strings.Contains(err.Error(), "dynamic section") {
		t.Errorf("readELF of an object with a compressed dynamic section: %v", err)
	}
	// Needs then adds nothing of it but the file (exec would fail the same way).
	var r Resolver
	ns, err := r.Needs(context.Background(), bad)
	if err != nil || len(ns) != 1 {
		t.Errorf("Needs: %v, %v", paths(ns), err)
	}
}

// FuzzReadELF: any file given as an ELF object is read without a panic, a hang
// or an allocation out of proportion (run with -fuzz).
func FuzzReadELF(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "obj")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		readELF(p)
	})
}

// TestScriptNamedPythonNotRun: a "#!" script named like an interpreter (a
// version manager's shim, or a script planted as ./python3) is not run to ask
// for its directories: its code would run on the host, unconfined. What it
// needs is its own interpreter.
func TestScriptNamedPythonNotRun(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "python3")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var r Resolver
	ns, err := r.Needs(context.Background(), script)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the script ran on the host")
	}
	found := false
	for _, n := range ns {
		found = found || strings.HasSuffix(n.Path, "/dash") || strings.HasSuffix(n.Path, "/sh")
	}
	if !found {
		t.Errorf("needs %v lack the script's interpreter /bin/sh", ns)
	}
}
