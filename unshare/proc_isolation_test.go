package unshare_test

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// TestProcessIsolation: the program sees a /proc of its own pid namespace: pid 1
// is the supervisor, no host process is there (the host's pid is not found), the
// supervisor's memory, environment and root cannot be opened; it cannot signal a
// host process nor trace anything.
func TestProcessIsolation(t *testing.T) {
	sb := sandbox(t, nil)
	victim := exec.Command("/bin/sleep", "30")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	out := providertest.Py(t, sb, providertest.TryPrelude+`
import ctypes, signal
host, victim = int(sys.argv[1]), int(sys.argv[2])
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("self", os.getpid(), "ppid", os.getppid())
print("has1", 1 in pids)
attempt("cmdline1", lambda: open("/proc/1/cmdline").read().split("\0")[0].startswith("pysandboxes-supervisor"))
attempt("environ1", lambda: open("/proc/1/environ").read())
attempt("mem1", lambda: open("/proc/1/mem", "rb").read(1))
attempt("root1", lambda: os.listdir("/proc/1/root"))
attempt("exe1", lambda: os.readlink("/proc/1/exe"))
attempt("host", lambda: os.stat("/proc/%d" % host))
attempt("kill-victim", lambda: os.kill(victim, signal.SIGKILL))
attempt("kill-1", lambda: os.kill(1, signal.SIGKILL))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH
print("ptrace", r, errno.errorcode.get(ctypes.get_errno()))
`, strconv.Itoa(os.Getpid()), strconv.Itoa(victim.Process.Pid))
	providertest.ExpectLine(t, out, "has1 True")
	providertest.ExpectLine(t, out, "cmdline1 OK True")
	for _, l := range []string{"environ1", "mem1", "root1", "exe1"} {
		providertest.ExpectLine(t, out, l+" EACCES")
	}
	providertest.ExpectLine(t, out, "host ENOENT")
	// The host's pid names no process of the sandbox's pid namespace.
	providertest.ExpectLine(t, out, "kill-victim ESRCH")
	// A SIGKILL to pid 1 from inside its namespace is dropped by the kernel: the
	// program carries on.
	providertest.ExpectLine(t, out, "kill-1 OK None")
	providertest.ExpectLine(t, out, "ptrace -1 EPERM")
	if victim.ProcessState != nil || syscall.Kill(victim.Process.Pid, 0) != nil {
		t.Error("the host process died")
	}
}

// TestHostnameDoesNotLeak: the program cannot change the hostname (no capability),
// and the host's hostname never changes.
func TestHostnameDoesNotLeak(t *testing.T) {
	before, _ := os.Hostname()
	sb := sandbox(t, nil)
	out := providertest.Py(t, sb, providertest.TryPrelude+`attempt("sethostname", lambda: socket.sethostname("pwned"))`)
	providertest.ExpectLine(t, out, "sethostname EPERM")
	if after, _ := os.Hostname(); after != before {
		t.Errorf("the hostname changed: %q -> %q", before, after)
	}
}

// TestMountAndUnshareRefused: mount, umount, unshare, setns and a nested user
// namespace are refused (by seccomp; without it, by the kernel).
func TestMountAndUnshareRefused(t *testing.T) {
	sb := sandbox(t, nil)
	out := providertest.Py(t, sb, providertest.TryPrelude+`
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(label, r):
    print(label, r, errno.errorcode.get(ctypes.get_errno()) if r < 0 else "")
call("mount", libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None))
call("umount", libc.umount2(b"/proc", 2))
call("unshare-user", libc.unshare(0x10000000))
call("unshare-mnt", libc.unshare(0x00020000))
call("setns", libc.setns(0, 0))
attempt("max-userns", lambda: open("/proc/sys/user/max_user_namespaces").read().strip())
`)
	providertest.ExpectLine(t, out, "max-userns OK 0")
	if seccomp.Available() == nil {
		for _, l := range []string{"mount -1 EPERM", "umount -1 EPERM", "unshare-user -1 EPERM", "unshare-mnt -1 EPERM", "setns -1 EPERM"} {
			providertest.ExpectLine(t, out, l)
		}
		return
	}
	// Without seccomp the kernel refuses them: no capability, and no user
	// namespace below the sandbox's.
	for _, l := range []string{"mount -1 ENOENT", "umount -1 EPERM", "unshare-user -1 ENOSPC", "unshare-mnt -1 EPERM", "setns -1 EINVAL"} {
		providertest.ExpectLine(t, out, l)
	}
}

// TestTreeKilledOnCancel: see providertest.TreeKilledOnCancel.
func TestTreeKilledOnCancel(t *testing.T) { providertest.TreeKilledOnCancel(t, "unshare") }
