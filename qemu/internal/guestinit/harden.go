package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"github.com/pysandboxes/pysandboxes/qemu/internal/mountinfo"

	"golang.org/x/sys/unix"
)

// The program runs as uid 0 of the guest when the host runs as root (the
// owner of the shared files as QEMU sees them), without any capability. The
// kernel still grants uid 0 some things by uid alone, not by capability: the
// owner's write permission on /proc/sys (every sysctl of the guest, among
// them kernel.core_pattern and kernel.modprobe, whose helpers the kernel runs
// as the guest's real root), /proc/sysrq-trigger (power off, kill every
// process of the guest), and the keyrings of uid 0 (its user and user
// session keyrings, shared by every program of the VM, and the kernel's own
// keyrings, which uid 0 owns). What follows takes these away, so that a program
// cannot become the guest's root nor leave anything behind for the programs
// that run after it in the same (warm) VM.

// procReadOnly are the parts of a program's /proc made read-only (bound
// read-only over themselves): the program holds no capability to remount them.
var procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs", "driver"}

// hardenProc makes the parts of the /proc mounted at proc that write to the
// guest's kernel read-only.
func hardenProc(proc string) error {
	for _, name := range procReadOnly {
		p := proc + "/" + name
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := syscall.Mount(p, p, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("/proc/%s: %w", name, err)
		}
		if err := syscall.Mount("", p, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("read-only /proc/%s: %w", name, err)
		}
	}
	return nil
}

// keyQuotas are the guest's key quotas, all set to 1 (the least the kernel
// takes): one key of one byte, less than any keyring (a user's keyrings
// count, their names too), so that no key can be added (add_key and
// request_key fail with EDQUOT) and none left in a uid's user keyring for a
// later program of the VM. The programs do not even reach those system calls
// (denyKeys): the quotas stay as a second wall. Nothing of the guest uses
// keys.
var keyQuotas = []string{"maxkeys", "maxbytes", "root_maxkeys", "root_maxbytes"}

// hardenKernel sets the guest kernel's settings that no program may change
// (the programs' /proc/sys is read-only).
func hardenKernel() error {
	for _, q := range keyQuotas {
		if err := os.WriteFile("/proc/sys/kernel/keys/"+q, []byte("1"), 0); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("key quota %s: %w", q, err)
		}
	}
	return nil
}

// Keyrings. Every program of a VM runs as the same uid, and the kernel's
// keyrings of that uid are shared by all of them: its user keyring (@u) and
// user session keyring (@us, which is also the program's session keyring @s:
// neither the init nor stage 2 joins a session keyring), and the persistent
// keyring that KEYCTL_GET_PERSISTENT makes on first use (kept three days).
// The thread, process and request-key keyrings (@t, @p, the requestor's) are
// the program's own, made on use. With keyctl a program could change what
// those shared keyrings are for the programs after it: their permissions
// (KEYCTL_SETPERM: they are the uid's own), an expiry (KEYCTL_SET_TIMEOUT,
// after which the keyring is gone), revocation and invalidation (which
// cannot be undone), a restriction (KEYCTL_RESTRICT_KEYRING, permanent),
// their links, a watch; and make the persistent keyring. Resetting them at
// each program's start cannot undo the permanent ones, so no program reaches
// them at all: stage 2 starts the program under a seccomp filter that refuses
// the key management system calls (add_key, request_key, keyctl) with EPERM,
// as the landlock, bwrap and unshare providers' filters do. The key quotas
// (hardenKernel) stay spent beside it. Nothing of the guest uses keys.

// Key management system calls: x86-64 (x32 numbers are the same with bit 30
// set) and i386 (int 0x80).
var (
	keyCalls64 = []uint32{248, 249, 250} // add_key, request_key, keyctl
	keyCalls32 = []uint32{286, 287, 288} // add_key, request_key, keyctl
	x32Bit     = uint32(0x40000000)
)

// keysFilter is the seccomp program of denyKeys:
//
//	0        ld arch
//	1        jeq AUDIT_ARCH_X86_64 ? next : i386
//	2        ld nr
//	3        and ~x32Bit
//	4..      jeq each of keyCalls64 ? deny : next
//	         ret allow
//	i386:    ld nr
//	         jeq each of keyCalls32 ? deny : next
//	         ret allow
//	deny:    ret errno(EPERM)
func keysFilter() []unix.SockFilter {
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		and   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	)
	n64, n32 := len(keyCalls64), len(keyCalls32)
	i386 := 5 + n64
	deny := i386 + n32 + 2
	p := []unix.SockFilter{
		{Code: ldAbs, K: 4}, // seccomp_data.arch
		{Code: jeq, K: unix.AUDIT_ARCH_X86_64, Jf: uint8(i386 - 2)},
		{Code: ldAbs, K: 0}, // seccomp_data.nr
		{Code: and, K: ^x32Bit},
	}
	for _, nr := range keyCalls64 {
		p = append(p, unix.SockFilter{Code: jeq, K: nr, Jt: uint8(deny - len(p) - 1)})
	}
	p = append(p, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}, unix.SockFilter{Code: ldAbs, K: 0})
	for _, nr := range keyCalls32 {
		p = append(p, unix.SockFilter{Code: jeq, K: nr, Jt: uint8(deny - len(p) - 1)})
	}
	return append(p, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)&unix.SECCOMP_RET_DATA})
}

// denyKeys installs the filter on the calling thread, which must have
// no_new_privs set (the program it starts inherits both).
func denyKeys() error {
	f := keysFilter()
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp filter of the key system calls: %w", err)
	}
	return nil
}

// freshTmp gives the program a /tmp of its own when the VM's /tmp holds
// shares (an exposed directory under /tmp): a new tmpfs in the program's mount
// namespace, with the shares (and the masks in them) bound at their places,
// moved over the VM's /tmp. What a program writes in /tmp is then gone with
// it, as when /tmp holds no share.
func freshTmp(tmp string) error {
	subs, err := mountsUnder(tmp)
	if err != nil {
		return err
	}
	stage, err := os.MkdirTemp("/", ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(stage)
	const nosuid = syscall.MS_NOSUID | syscall.MS_NODEV
	if err := syscall.Mount("tmpfs", stage, "tmpfs", nosuid, "mode=1777"); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	for _, s := range subs {
		rel := strings.TrimPrefix(s, tmp)
		dst := stage + rel
		var st syscall.Stat_t
		if err := syscall.Stat(s, &st); err != nil {
			return fmt.Errorf("/tmp%s: %w", rel, err)
		}
		if err := mountPoint(dst, st.Mode&syscall.S_IFMT == syscall.S_IFDIR); err != nil {
			return fmt.Errorf("/tmp%s: %w", rel, err)
		}
		if err := syscall.Mount(s, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("/tmp%s: %w", rel, err)
		}
	}
	if err := syscall.Mount(stage, tmp, "", syscall.MS_MOVE, ""); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	return nil
}

// isShare reports whether the topmost mount at path is a 9p share (not the
// VM's own tmpfs). statfs cannot tell: 9p reports the type of the host's
// file system.
func isShare(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	share := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || mountinfo.Unescape(f[4]) != path {
			continue
		}
		_, fs, _ := strings.Cut(l, " - ")
		share = strings.HasPrefix(fs, "9p ")
	}
	return share
}

// mountsUnder returns the mount points strictly under dir that no other mount
// point of the list contains (the mounts of the parent mounts' own trees come
// with a recursive bind), in /proc/self/mountinfo's order.
func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return topMounts(string(b), dir), nil
}

// topMounts is mountsUnder of a mountinfo's text.
func topMounts(text, dir string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		mp := mountinfo.Unescape(f[4])
		if !strings.HasPrefix(mp, dir+"/") {
			continue
		}
		inside := false
		for _, o := range out {
			if strings.HasPrefix(mp, o+"/") || mp == o {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, filepath.Clean(mp))
		}
	}
	return out
}
