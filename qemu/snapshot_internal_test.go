package qemu

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStateKey: the saved state is keyed on the QEMU binary, the kernel, the
// initramfs (their paths and identities) and the machine's configuration
// (the command line included): a change to any of them is another key.
func TestStateKey(t *testing.T) {
	dir := t.TempDir()
	var paths [3]string
	for i, n := range []string{"qemu", "vmlinux", "initrd"} {
		paths[i] = filepath.Join(dir, n)
		if err := os.WriteFile(paths[i], []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := machine{QEMU: paths[0], Kernel: paths[1], Initrd: paths[2], Memory: 512, CPUs: 1, Accel: "tcg", Cmdline: bootArgs}
	key := func(m machine) string {
		t.Helper()
		k, err := stateKey(&m)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(base)
	if key(base) != k0 {
		t.Fatal("the key is not stable")
	}
	changed := map[string]machine{}
	m := base
	m.Cmdline += " quiet"
	changed["command line"] = m
	m = base
	m.Memory = 1024
	changed["memory"] = m
	m = base
	m.Net = true
	changed["network device"] = m
	m.Netdev = guestNetdev
	changed["network device and its netdev"] = m
	other := m
	other.Netdev = "user,id=n0,restrict=on"
	if key(other) == key(m) {
		t.Error("a change of the netdev keeps the key")
	}
	for what, m := range changed {
		if key(m) == k0 {
			t.Errorf("a change of the %s keeps the key", what)
		}
	}
	for _, p := range paths {
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
		if k := key(base); k == k0 {
			t.Errorf("rewriting %s keeps the key", filepath.Base(p))
		} else {
			k0 = k
		}
	}
	if _, err := stateKey(&machine{QEMU: filepath.Join(dir, "missing"), Kernel: paths[1], Initrd: paths[2]}); err == nil {
		t.Error("a missing QEMU binary gave a key")
	}
}
