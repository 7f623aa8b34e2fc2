package firejail_test

import (
	"testing"
)

// TestSeccompInEffect: the program runs under firejail's seccomp filter
// (Seccomp: 2) and the provider's additions, with no_new_privs and no
// capability: mount, unshare, ptrace, keyctl, bpf and io_uring are refused
// (EPERM), raw sockets too (no CAP_NET_RAW), packet sockets by the protocol
// filter (EOPNOTSUPP); TCP, UDP and Unix sockets can be made (UDP reaches
// nothing: the only interface is loopback).
func TestSeccompInEffect(t *testing.T) {
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
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
attempt("tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
def udp_out():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", ("10.1.2.3", 53))
    finally:
        s.close()
attempt("udp-out", udp_out)
`)
	expectLine(t, out, "seccomp 2")
	expectLine(t, out, "nnp 1")
	expectLine(t, out, "capeff 0000000000000000")
	expectLine(t, out, "capbnd 0000000000000000")
	for _, l := range []string{"mount", "unshare", "ptrace", "keyctl", "bpf", "io_uring", "raw"} {
		expectLine(t, out, l+" EPERM")
	}
	expectLine(t, out, "packet ENOTSUP") // EOPNOTSUPP
	expectLine(t, out, "tcp OK None")
	expectLine(t, out, "unix OK None")
	expectLine(t, out, "udp-out ENETUNREACH")
}
