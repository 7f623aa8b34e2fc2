package qemu

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestJailFor: the jail shows QEMU's files read-only, the guest's kernel and
// initramfs, the device nodes QEMU opens, the network's files only with a
// network, /dev/kvm only under KVM, and each share with its mode; a share of
// a path the jail shows already (a writable /usr) keeps its own mode.
func TestJailFor(t *testing.T) {
	m := &machine{QEMU: "/usr/bin/qemu-system-x86_64", Kernel: "/c/vmlinux", Initrd: "/c/initramfs", Accel: "tcg"}
	j := m.jailFor([]share{{Path: "/srv/ro", ReadOnly: true}, {Path: "/srv/rw"}, {Path: "/usr"}}, "/c/empty")
	find := func(j *jailSpec, p string) (jailBind, bool) {
		i := slices.IndexFunc(j.Binds, func(b jailBind) bool { return b.Path == p })
		if i < 0 {
			return jailBind{}, false
		}
		return j.Binds[i], true
	}
	for _, c := range []struct {
		path   string
		ro, ok bool
	}{
		{"/usr", false, true}, {"/c/vmlinux", true, true}, {"/c/initramfs", true, true}, {"/c/empty", true, true},
		{"/srv/ro", true, true}, {"/srv/rw", false, true}, {"/dev/null", false, true}, {"/dev/urandom", false, true},
		{"/dev/kvm", false, false}, {"/etc/resolv.conf", false, false}, {"/etc/passwd", false, false}, {"/proc", false, false},
	} {
		b, ok := find(j, c.path)
		if ok != c.ok || (ok && b.RO != c.ro) {
			t.Errorf("%s: %+v (present %v), want present %v read-only %v", c.path, b, ok, c.ok, c.ro)
		}
	}
	if !j.Proc {
		t.Error("no /proc of QEMU's own")
	}
	if b, _ := find(j, "/dev/null"); !b.Dev {
		t.Error("/dev/null is not bound as a device")
	}
	m.Accel, m.Net = "kvm", true
	j = m.jailFor(nil, "")
	for _, p := range []string{"/dev/kvm", "/etc/resolv.conf", "/etc/hosts"} {
		if _, ok := find(j, p); !ok {
			t.Errorf("%s missing with KVM and a network", p)
		}
	}
	m.QEMU = "/opt/qemu/bin/qemu-system-x86_64"
	if b, ok := find(m.jailFor(nil, ""), "/opt/qemu"); !ok || !b.RO {
		t.Errorf("a QEMU in /opt/qemu: its prefix %+v (present %v), want read-only", b, ok)
	}
}

// TestJailProbeLeavesProcess: the probe of the jail (which makes a mount
// namespace, pivots into it and cuts the capabilities, on a thread of its own)
// leaves the process as it was: its working directory, its root, its mount
// namespace, its capabilities, on every thread it runs on afterwards and on
// the main thread (which /proc/self shows, and which the runtime never ends).
func TestJailProbeLeavesProcess(t *testing.T) {
	if err := jailAvailable(); err != nil {
		t.Skipf("QEMU's jail cannot be made here: %v", err)
	}
	wd, _ := os.Getwd()
	ns, _ := os.Readlink("/proc/thread-self/ns/mnt")
	caps := func() string {
		b, _ := os.ReadFile("/proc/thread-self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") {
				return l
			}
		}
		return ""
	}
	want := caps()
	for range 5 {
		if err := jailAvailable(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if got := caps(); got != want {
				t.Errorf("a thread's capabilities after the probe: %q, want %q", got, want)
			}
			if n, _ := os.Readlink("/proc/thread-self/ns/mnt"); n != ns {
				t.Errorf("a thread's mount namespace after the probe: %q, want %q", n, ns)
			}
			if _, err := os.Stat("/etc/passwd"); err != nil {
				t.Errorf("a thread's root after the probe: %v", err)
			}
		}()
	}
	wg.Wait()
	// The main thread too (what /proc/self shows): the probe never runs on it.
	if n, _ := os.Readlink("/proc/self/ns/mnt"); n != ns {
		t.Errorf("the main thread's mount namespace after the probe: %q, want %q", n, ns)
	}
	if r, _ := os.Readlink("/proc/self/root"); r != "/" {
		t.Errorf("the main thread's root after the probe: %q, want /", r)
	}
	if now, _ := os.Getwd(); now != wd {
		t.Errorf("working directory after the probe: %q, want %q", now, wd)
	}
}
