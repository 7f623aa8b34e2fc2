package bwrap_test

import (
	"testing"
)

// TestSeccompInEffect: the program runs under the seccomp filter (Seccomp: 2),
// with no_new_privs and no capability; mount, unshare, ptrace, keyctl, bpf and
// io_uring are refused (EPERM), so are UDP, raw and packet sockets without a
// net= rule; TCP and Unix sockets can be made.
func TestSeccompInEffect(t *testing.T) {
	requireSeccomp(t)
	sb := sandbox(t, nil)
	out := py(t, sb, tryPrelude+`
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def sys_call(name, *args):
    def f():
        r = getattr(libc, name)(*args)
        if r == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return r
    return f
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("seccomp", status["Seccomp"].strip())
print("nnp", status["NoNewPrivs"].strip())
print("capeff", status["CapEff"].strip())
print("capbnd", status["CapBnd"].strip())
attempt("mount", sys_call("mount", b"none", b"/", b"tmpfs", 0, None))
attempt("unshare", sys_call("unshare", 0x00020000))
attempt("ptrace", sys_call("ptrace", 16, 1, 0, 0))
attempt("keyctl", sys_call("syscall", 250, 0, 0, 0, 0))
attempt("bpf", sys_call("syscall", 321, 0, 0, 0))
attempt("io_uring", sys_call("syscall", 425, 1, 0))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
attempt("tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
`)
	expectLine(t, out, "seccomp 2")
	expectLine(t, out, "nnp 1")
	expectLine(t, out, "capeff 0000000000000000")
	expectLine(t, out, "capbnd 0000000000000000")
	for _, l := range []string{"mount", "unshare", "ptrace", "keyctl", "bpf", "io_uring", "udp", "raw", "packet"} {
		expectLine(t, out, l+" EPERM")
	}
	expectLine(t, out, "tcp OK None")
	expectLine(t, out, "unix OK None")
}
