package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrepareCached: the guest's kernel and initramfs are made once and found
// again by the identities of what they were made of; a changed kernel image,
// module or init makes them again.
func TestPrepareCached(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	os.Mkdir(cache, 0o700)
	mods := filepath.Join(dir, "lib", "modules", "6.1.0-test")
	os.MkdirAll(filepath.Join(mods, "kernel"), 0o755)
	// An uncompressed kernel is used as it is; the guest's modules: one
	// loadable (virtio_mmio), the others built in.
	image := filepath.Join(dir, "vmlinux-6.1.0-test")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(image, "\x7fELF kernel")
	write(filepath.Join(mods, "modules.dep"), "kernel/virtio_mmio.ko:\n")
	write(filepath.Join(mods, "modules.builtin"), "kernel/virtio_console.ko\nkernel/9pnet_virtio.ko\nkernel/9p.ko\nkernel/virtio_net.ko\n")
	mod := filepath.Join(mods, "kernel", "virtio_mmio.ko")
	write(mod, "module v1")
	k := &kernel{Image: image, Version: "6.1.0-test", Modules: mods}
	init := []byte("init v1")
	_, initrd, err := guestFiles(cache, k, init)
	if err != nil {
		t.Fatal(err)
	}
	// Found again: even a changed initramfs is not rebuilt (the record is
	// trusted while its sources are unchanged).
	write(initrd, "marked")
	if _, again, err := guestFiles(cache, k, init); err != nil || again != initrd {
		t.Fatalf("not found again: %s, %v", again, err)
	}
	if b, _ := os.ReadFile(initrd); string(b) != "marked" {
		t.Fatal("the initramfs was rebuilt though nothing changed")
	}
	for what, change := range map[string]func(){
		"the module": func() { write(mod, "module v2") },
		"the init":   func() { init = []byte("init v2") },
	} {
		change()
		_, next, err := guestFiles(cache, k, init)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(next); string(b) == "marked" {
			t.Errorf("a change of %s did not rebuild the initramfs", what)
		}
		write(next, "marked")
	}
	// A new kernel (its modules unchanged: the same initramfs) is recorded
	// anew.
	later := time.Now().Add(time.Hour)
	write(image, "\x7fELF kernel v2")
	os.Chtimes(image, later, later)
	if _, _, err := guestFiles(cache, k, init); err != nil {
		t.Fatal(err)
	}
	recs, _ := filepath.Glob(filepath.Join(cache, "prep-*"))
	found := false
	for _, r := range recs {
		b, _ := os.ReadFile(r)
		found = found || strings.Contains(string(b), fileID(image))
	}
	if !found {
		t.Error("a change of the kernel was not recorded")
	}
}
