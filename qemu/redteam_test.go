package qemu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/qemu"
)

// Attacks of a program in the guest on what the security corpus does not
// reach: the guest's own kernel, the programs that run after it in the same
// warm VM, the host's side of the 9p shares, and the init's channel to the
// host. Each runs in the shared VM (sandbox) as a real Python program and
// asserts the denial itself.

// redteamPrelude defines attempt(label, f): it prints "label OK" or "label
// ERRNAME" (the errno of the OSError, or of a libc call returning -1).
const redteamPrelude = `
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def attempt(label, f):
    try:
        r = f()
        if isinstance(r, int) and r < 0:
            print(label, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()), flush=True)
        else:
            print(label, "OK", flush=True)
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno), flush=True)
def write(p, v):
    with open(p, "w") as f:
        return f.write(v)
def must(ok):
    if not ok:
        raise OSError(errno.EINVAL, "check failed")
    return True
def add_key():
    return libc.syscall(248, b"user", b"pysb-left", b"secret", 6, ctypes.c_int(-4))  # add_key(@u)
`

// runAttempts runs code (after the prelude) in the shared VM and returns each
// label's outcome.
func runAttempts(t *testing.T, code string, args ...string) map[string]string {
	t.Helper()
	sb, dir := sandbox(t)
	return attemptsIn(t, sb, filepath.Join(dir, "rw"), code, args...)
}

// attemptsIn runs code (after the prelude) in sb, in directory dir ("" is
// the host's), and returns each label's outcome.
func attemptsIn(t *testing.T, sb *pysandboxes.Sandbox, dir, code string, args ...string) map[string]string {
	t.Helper()
	cmd := sb.Command(context.Background(), python, append([]string{"-c", redteamPrelude + code}, args...)...)
	cmd.Dir = dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	return got
}

// expect checks each label's outcome against its allowed ones ("A|B").
func expect(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if !strings.Contains("|"+w+"|", "|"+got[k]+"|") {
			t.Errorf("%s: got %q, want %s", k, got[k], w)
		}
	}
}

// TestGuestKernelUntouchable: the program is uid 0 of the guest when the host
// runs as root, without capabilities; the kernel grants uid 0 the owner's
// write permission on /proc/sys by uid alone. A writable
// kernel.core_pattern or kernel.modprobe would run a file of the program as
// the guest's real root (out of its namespaces, into the init's), and
// /proc/sysrq-trigger would kill every process of the VM: all are read-only.
// Keys cannot be added (they would outlive the program in its uid's user
// keyring): the key system calls are refused (TestKeyringsUnchangeable). Module loading, kexec, reboot, bpf, ptrace of stage 2 and its
// namespaces are refused too.
func TestGuestKernelUntouchable(t *testing.T) {
	got := runAttempts(t, `
attempt("core-pattern", lambda: write("/proc/sys/kernel/core_pattern", "|/tmp/x"))
attempt("modprobe", lambda: write("/proc/sys/kernel/modprobe", "/tmp/x"))
attempt("sysctl", lambda: write("/proc/sys/fs/lease-break-time", "7"))
attempt("hostname-sysctl", lambda: write("/proc/sys/kernel/hostname", "x"))
attempt("sysrq", lambda: os.close(os.open("/proc/sysrq-trigger", os.O_WRONLY)))
attempt("irq", lambda: write("/proc/irq/default_smp_affinity", "1"))
attempt("umount-proc-sys", lambda: libc.umount2(b"/proc/sys", 2))
attempt("remount-proc-sys", lambda: libc.mount(None, b"/proc/sys", None, 32 | 4096, None))  # MS_REMOUNT|MS_BIND
attempt("add-key", add_key)
attempt("finit-module", lambda: libc.syscall(313, 0, b"", 0))
attempt("kexec", lambda: libc.syscall(246, 0, 0, None, 0))
attempt("reboot", lambda: libc.syscall(169, 0xfee1dead, 672274793, 0x4321fedc, None))
attempt("bpf", lambda: libc.syscall(321, 0, None, 0))
attempt("ptrace-stage2", lambda: libc.ptrace(16, 1, None, None))
attempt("setns-init", lambda: libc.setns(os.open("/proc/1/ns/mnt", os.O_RDONLY), 0))
attempt("stage2-status-pipe", lambda: os.open("/proc/1/fd/4", os.O_WRONLY))
attempt("ping-socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP).close())
`)
	expect(t, got, map[string]string{
		"core-pattern": "EROFS", "modprobe": "EROFS", "sysctl": "EROFS", "hostname-sysctl": "EROFS", "sysrq": "EROFS",
		"irq": "EROFS", "umount-proc-sys": "EPERM", "remount-proc-sys": "EPERM", "add-key": "EPERM",
		"finit-module": "EPERM", "kexec": "EPERM", "reboot": "EPERM", "bpf": "EPERM", "ptrace-stage2": "EPERM",
		"setns-init": "EACCES", "stage2-status-pipe": "EACCES", "ping-socket": "EACCES",
	})
}

// TestNothingLeftBehind: programs of a sandbox run one after the other in one
// warm VM; what one leaves in the VM (a file in /tmp, which holds the shares
// here, or /dev/shm, a key, a guest setting) is not there for the next.
func TestNothingLeftBehind(t *testing.T) {
	first := runAttempts(t, `
attempt("tmp", lambda: write("/tmp/pysb-left", "left"))
attempt("shm", lambda: write("/dev/shm/pysb-left", "left"))
attempt("key", add_key)
attempt("sysctl", lambda: write("/proc/sys/fs/lease-break-time", "7"))
`)
	expect(t, first, map[string]string{"tmp": "OK", "shm": "OK", "key": "EPERM", "sysctl": "EROFS"})
	second := runAttempts(t, `
import sys
attempt("tmp", lambda: open("/tmp/pysb-left").read())
attempt("shm", lambda: open("/dev/shm/pysb-left").read())
attempt("key", lambda: libc.syscall(250, 10, ctypes.c_int(-4), b"user", b"pysb-left", 0))  # KEYCTL_SEARCH @u
attempt("sysctl", lambda: must(open("/proc/sys/fs/lease-break-time").read() != "7\n"))
attempt("shares-kept", lambda: os.listdir(sys.argv[1]))
`, filepath.Join(shared.dir, "ro"))
	expect(t, second, map[string]string{"tmp": "ENOENT", "shm": "ENOENT", "key": "EPERM", "sysctl": "OK", "shares-kept": "OK"})
}

// keyringsPrelude defines kc (keyctl), keys() (the guest's keyrings as
// /proc/keys shows them to the program, without the usage count, which moves
// with the processes that hold a keyring) and the keyrings a program can name.
const keyringsPrelude = `
import json
def kc(*a):
    return libc.syscall(250, *[ctypes.c_long(x) if isinstance(x, int) else x for x in a])
def keys():
    out = []
    for l in open("/proc/keys"):
        f = l.split(None, 3)
        out.append(f[0] + " " + f[1] + " " + f[3].strip())
    return sorted(out)
specs = {"thread": -1, "process": -2, "session": -3, "user": -4, "user-session": -5, "group": -6, "reqkey-auth": -7, "requestor": -8}
`

// TestKeyringsUnchangeable: programs of one warm VM run as one uid, whose
// keyrings (user, user session, which is also the program's session
// keyring, and the persistent keyring KEYCTL_GET_PERSISTENT makes) the
// kernel shares between them. A program tries to change every keyring it can
// name (the special ids, the serial numbers /proc/keys shows, the persistent
// keyring) in every way keyctl has: permissions, owner, expiry, revocation,
// invalidation, clearing, a restriction, links, a session keyring of its
// own; every attempt fails with EPERM (the key system calls are refused),
// and the next program sees the keyrings as the first found them.
func TestKeyringsUnchangeable(t *testing.T) {
	first := runAttempts(t, keyringsPrelude+`
before = keys()
print("before", json.dumps(before), flush=True)
ids = dict(specs)
for l in before:
    ids["serial-" + l.split()[0]] = int(l.split()[0], 16)
buf = ctypes.create_string_buffer(256)
for name, k in ids.items():
    attempt("describe:" + name, lambda k=k: kc(6, k, buf, 256))
    attempt("setperm:" + name, lambda k=k: kc(5, k, 0x3f3f3f3f))
    attempt("chown:" + name, lambda k=k: kc(4, k, 1, 1))
    attempt("timeout:" + name, lambda k=k: kc(15, k, 1))
    attempt("revoke:" + name, lambda k=k: kc(3, k))
    attempt("invalidate:" + name, lambda k=k: kc(21, k))
    attempt("clear:" + name, lambda k=k: kc(7, k))
    attempt("restrict:" + name, lambda k=k: kc(29, k, None, None))
    attempt("link:" + name, lambda k=k: kc(8, -4, k))
    attempt("unlink:" + name, lambda k=k: kc(9, k, -5))
attempt("join-session", lambda: kc(1, b"pysb-session"))
attempt("join-anonymous-session", lambda: kc(1, None))
attempt("session-to-parent", lambda: kc(18))
attempt("persistent", lambda: kc(22, -1, -4))
attempt("add-key", add_key)
attempt("request-key", lambda: libc.syscall(249, b"user", b"pysb-left", None, ctypes.c_int(-4)))
print("after", json.dumps(keys()), flush=True)
`)
	if first["before"] == "" || first["before"] != first["after"] {
		t.Errorf("the keyrings changed under the first program:\nbefore %s\nafter  %s", first["before"], first["after"])
	}
	n := 0
	for k, v := range first {
		if k == "before" || k == "after" {
			continue
		}
		n++
		if v != "EPERM" {
			t.Errorf("%s: %s, want EPERM", k, v)
		}
	}
	if n < 100 {
		t.Errorf("only %d attempts ran", n)
	}
	second := runAttempts(t, keyringsPrelude+`
print("keys", json.dumps(keys()), flush=True)
`)
	if second["keys"] != first["before"] {
		t.Errorf("the next program's keyrings:\n%s\nwant those the first found:\n%s", second["keys"], first["before"])
	}
}

// TestSharesOnTheHost: what the program makes in a writable share is, on the
// host, a plain file of QEMU's user, mode 0600: its symbolic links (absolute,
// relative, "..") and FIFOs are regular files that hold the target's name (the
// host never follows them), set-id bits and owners stay in the guest
// (mapped-xattr), devices cannot be made. Links and renames out of a share
// fail (EXDEV), QEMU's own attributes (user.virtfs.*) cannot be forged, and a
// host set-uid file the guest writes loses its bit.
func TestSharesOnTheHost(t *testing.T) {
	_, dir := sandbox(t)
	rw := filepath.Join(dir, "rw")
	sub := filepath.Join(rw, "rt")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(sub, "host-suid")
	if err := os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(suid, 0o4755)
	got := runAttempts(t, `
import sys
os.chdir("rt")
ro = sys.argv[1]
attempt("symlink-abs", lambda: os.symlink("/etc/shadow", "sl-abs"))
attempt("symlink-rel", lambda: os.symlink("../../secret/key", "sl-rel"))
attempt("symlink-dotdot", lambda: os.symlink("..", "sl-up"))
attempt("follow-rel", lambda: open("sl-rel").read())
attempt("mkfifo", lambda: os.mkfifo("fifo"))
attempt("mknod-chr", lambda: os.mknod("chr", 0o20666, os.makedev(1, 3)))
attempt("mknod-blk", lambda: os.mknod("blk", 0o60666, os.makedev(8, 0)))
attempt("setuid", lambda: (write("suid", "#!/bin/sh\n"), os.chmod("suid", 0o6777)))
attempt("chown", lambda: os.chown("suid", 1234, 1234))
attempt("exec-mode", lambda: (write("exe", "#!/bin/sh\n"), os.chmod("exe", 0o755)))
attempt("hardlink-out", lambda: os.link(ro + "/data.txt", "hl"))
attempt("rename-out", lambda: os.rename(ro + "/data.txt", "mv"))
attempt("rename-to-tmp", lambda: (write("x", ""), os.rename("x", "/tmp/x")))
attempt("virtfs-uid", lambda: os.setxattr("suid", "user.virtfs.uid", b"\0\0\0\0"))
attempt("virtfs-mode", lambda: os.setxattr("suid", "user.virtfs.mode", b"\xed\x8d\0\0"))
attempt("virtfs-read", lambda: os.getxattr("suid", "user.virtfs.mode"))
attempt("trusted-xattr", lambda: os.setxattr("suid", "trusted.overlay.redirect", b"/etc"))
attempt("file-capability", lambda: os.setxattr("exe", "security.capability", b"\x01\0\0\x02" + b"\xff" * 16))
attempt("write-host-suid", lambda: write("host-suid", "#!/bin/sh\nid\n"))
attempt("mirror-write", lambda: open("/etc/ld.so.cache", "r+b"))
attempt("mirror-remount", lambda: libc.mount(None, b"/etc/ld.so.cache", None, 32 | 4096, None))
`, filepath.Join(dir, "ro"))
	expect(t, got, map[string]string{
		"symlink-abs": "OK", "symlink-rel": "OK", "symlink-dotdot": "OK", "follow-rel": "ENOENT", "mkfifo": "OK",
		"mknod-chr": "EPERM", "mknod-blk": "EPERM", "setuid": "OK", "chown": "EPERM", "exec-mode": "OK",
		"hardlink-out": "EXDEV", "rename-out": "EXDEV", "rename-to-tmp": "EXDEV", "virtfs-uid": "EACCES",
		"virtfs-mode": "EACCES", "virtfs-read": "ENODATA", "trusted-xattr": "EPERM", "file-capability": "EPERM",
		"write-host-suid": "OK", "mirror-write": "EROFS", "mirror-remount": "EPERM",
	})
	for _, name := range []string{"sl-abs", "sl-rel", "sl-up", "fifo", "suid", "exe"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(sub, name), &st); err != nil {
			t.Errorf("%s on the host: %v", name, err)
			continue
		}
		if st.Mode != syscall.S_IFREG|0o600 || st.Uid != uint32(os.Geteuid()) {
			t.Errorf("%s on the host: mode %#o uid %d, want a regular file of mode 0600 owned by %d", name, st.Mode, st.Uid, os.Geteuid())
		}
	}
	if b, err := os.ReadFile(filepath.Join(sub, "sl-abs")); err != nil || string(b) != "/etc/shadow" {
		t.Errorf("the guest's symbolic link on the host holds %q (%v), want the target's name", b, err)
	}
	for _, name := range []string{"chr", "blk", "hl", "mv"} {
		if _, err := os.Lstat(filepath.Join(sub, name)); !os.IsNotExist(err) {
			t.Errorf("%s exists on the host (%v)", name, err)
		}
	}
	if st, err := os.Stat(suid); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("the host's set-uid file after the guest wrote it: %v, %v", fmtMode(st), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ro", "data.txt")); err != nil {
		t.Errorf("the read-only share's file: %v", err)
	}
}

func fmtMode(st os.FileInfo) string {
	if st == nil {
		return "-"
	}
	return fmt.Sprint(st.Mode())
}

// TestChannelUnreachable: the program cannot reach the init's channel to the
// host (the virtio-serial ports, the console), the guest's devices or /sys,
// nor its stage 2's descriptors: its /dev holds the usual few nodes only.
func TestChannelUnreachable(t *testing.T) {
	got := runAttempts(t, `
attempt("dev", lambda: must(sorted(os.listdir("/dev")) == ['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero']))
attempt("vport", lambda: os.open("/dev/vport0p1", os.O_RDWR))
attempt("hvc", lambda: os.open("/dev/hvc0", os.O_RDWR))
attempt("console", lambda: os.open("/dev/console", os.O_RDWR))
attempt("mknod-vport", lambda: os.mknod("/tmp/vport", 0o20600, os.makedev(250, 1)))
attempt("sys", lambda: os.listdir("/sys"))
attempt("mount-sysfs", lambda: libc.mount(b"sysfs", b"/tmp", b"sysfs", 0, None))
attempt("mount-devtmpfs", lambda: libc.mount(b"devtmpfs", b"/tmp", b"devtmpfs", 0, None))
attempt("stage2-stderr", lambda: os.open("/proc/1/fd/2", os.O_WRONLY))
attempt("stage2-root", lambda: os.listdir("/proc/1/root/"))
attempt("stage2-environ", lambda: open("/proc/1/environ").read())
`)
	expect(t, got, map[string]string{
		"dev": "OK", "vport": "ENOENT", "hvc": "ENOENT", "console": "ENOENT", "mknod-vport": "EPERM", "sys": "ENOENT",
		"mount-sysfs": "EPERM", "mount-devtmpfs": "EPERM", "stage2-stderr": "EACCES", "stage2-root": "EACCES",
		"stage2-environ": "EACCES",
	})
}

// TestIgnoreMaskHolds: an ignored file (absent through the filter, or
// masked at the VM's start without it) cannot be uncovered (unmount, a bind
// or move of its own, a handle of its directory) nor reached through a link
// of the program's.
func TestIgnoreMaskHolds(t *testing.T) {
	_, dir := sandbox(t)
	env := filepath.Join(dir, "ro", ".env")
	got := runAttempts(t, `
import sys
env = sys.argv[1]
def read_all(p):
    with open(p, "rb") as f:
        must(b"hunter2" not in f.read())
attempt("read", lambda: read_all(env))
attempt("umount", lambda: libc.umount2(env.encode(), 0))
attempt("umount-detach", lambda: libc.umount2(env.encode(), 2))
attempt("bind-parent", lambda: libc.mount(os.path.dirname(env).encode(), b"/tmp", None, 4096, None))
attempt("open-by-handle", lambda: libc.syscall(304, -100, None, 0))
attempt("symlink", lambda: (os.symlink(env, "/tmp/envlink"), read_all("/tmp/envlink")))
attempt("proc-fd-dir", lambda: read_all("/proc/self/fd/%d/.env" % os.open(os.path.dirname(env), os.O_RDONLY)))
`, env)
	expect(t, got, map[string]string{
		"read": "ENOENT|EACCES|OK", "umount": "EPERM|ENOENT", "umount-detach": "EPERM|ENOENT", "bind-parent": "EPERM",
		"open-by-handle": "EPERM", "symlink": "ENOENT|EACCES|OK", "proc-fd-dir": "ENOENT|EACCES|OK",
	})
}

// TestExposedTmpIsTheShare: a program of a VM whose /tmp is itself exposed
// sees the share there (not a tmpfs of its own that would hide it), and what
// it writes there reaches the host.
func TestExposedTmpIsTheShare(t *testing.T) {
	requireQEMU(t)
	marker, err := os.CreateTemp("/tmp", "pysb-qemu-tmp-share-")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	defer os.Remove(marker.Name())
	defer os.Remove(marker.Name() + "-guest")
	pol, _ := writePolicy(t, t.TempDir(), "expose-rw=/tmp")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	out, err := sb.Command(context.Background(), python, "-c", `
import os, sys
print(os.path.exists(sys.argv[1]))
open(sys.argv[1] + "-guest", "w").write("from the guest")
`, marker.Name()).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "True" {
		t.Errorf("the host's file in the exposed /tmp, seen from the guest: %s", out)
	}
	if b, err := os.ReadFile(marker.Name() + "-guest"); err != nil || string(b) != "from the guest" {
		t.Errorf("the guest's file in the exposed /tmp, seen from the host: %q, %v", b, err)
	}
}
