package qemu

import (
	"slices"
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
