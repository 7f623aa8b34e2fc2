# Operations that the seccomp filter refuses or allows, run by process_test.go
# under the supervisor, with and without the filter.
#
# Usage: python3 checks.py [NAME...]   (no name: every check)
# Prints one line per check, "NAME RESULT", as soon as it is known. RESULT is "ok",
# the errno name of the failure (EPERM, ...), the name of another exception, or
# for the checks of VALUES the value they report.
#
# Every call is harmless when nothing refuses it: invalid arguments, paths that do
# not exist, wrong magic numbers, and whatever it creates is closed at once.
import ctypes
import errno
import fcntl
import os
import socket
import subprocess
import sys
import termios
import threading

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

NOWHERE = b"/nonexistent-pysandboxes"
HI = 1 << 32  # a garbage upper half for a 32-bit argument
CLONE_THREAD = 0x10000
CLONE_PARENT = 0x8000


def sc(nr, *args):
    """A raw system call; integers go as 64-bit longs, so upper bits arrive as is."""
    conv = [ctypes.c_long(a - (1 << 64) if a >= 1 << 63 else a) if isinstance(a, int) else a for a in args]
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def sc_close(nr, *args):
    fd = sc(nr, *args)
    os.close(fd)


def sock(family, type_, proto=0):
    socket.socket(family, type_, proto).close()


def pair(family=socket.AF_UNIX):
    buf = (ctypes.c_int * 2)()
    sc(53, family, socket.SOCK_STREAM, 0, buf)
    os.close(buf[0])
    os.close(buf[1])


_pty = None


def pty():
    global _pty
    if _pty is None:
        _pty = os.openpty()
    return _pty[1]


def personality(p):
    old = sc(135, 0xFFFFFFFF)
    sc(135, p)
    sc(135, old)  # reached only without the filter


def run(*argv):
    subprocess.run(list(argv), check=True)


def thread():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()


def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7


def spawn():
    pid = os.posix_spawn("/bin/true", ["true"], {})
    _, status = os.waitpid(pid, 0)
    assert status == 0


def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split()[1]


def supervisor_threads():
    """How many threads of the supervisor are confined, out of how many."""
    modes = []
    task = "/proc/%d/task" % os.getppid()
    for tid in os.listdir(task):
        with open("%s/%s/status" % (task, tid)) as f:
            modes += [line.split()[1] for line in f if line.startswith("Seccomp:")]
    return "%d/%d" % (modes.count("2"), len(modes))


def io_uring_setup():
    params = ctypes.create_string_buffer(120)
    sc_close(425, 1, params)


CHECKS = {
    # socket(2)
    "tcp": lambda: sock(socket.AF_INET, socket.SOCK_STREAM),
    "tcp6": lambda: sock(socket.AF_INET6, socket.SOCK_STREAM),
    "tcp_proto": lambda: sock(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, socket.IPPROTO_TCP),
    "udp": lambda: sock(socket.AF_INET, socket.SOCK_DGRAM),
    "udp6": lambda: sock(socket.AF_INET6, socket.SOCK_DGRAM),
    "udp_flags": lambda: sock(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC),
    "udp_proto": lambda: sock(socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_UDP),
    "icmp_ping": lambda: sock(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
    "mptcp": lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 262),
    "mptcp6": lambda: sock(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC, 262),
    "sctp": lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 132),
    "smc": lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 256),
    "raw": lambda: sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    "raw6": lambda: sock(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    "inet_sock_packet": lambda: sc_close(41, socket.AF_INET, 10, 0),  # the kernel makes it AF_PACKET
    "packet": lambda: sock(socket.AF_PACKET, socket.SOCK_RAW, 0),
    "packet_dgram": lambda: sock(socket.AF_PACKET, socket.SOCK_DGRAM, 0),
    "vsock": lambda: sock(40, socket.SOCK_STREAM),
    "alg": lambda: sock(38, socket.SOCK_SEQPACKET),
    "netlink_route": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 0),
    "netlink_route_dgram": lambda: sock(socket.AF_NETLINK, socket.SOCK_DGRAM, 0),
    "netlink_audit": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 9),
    "netlink_sock_diag": lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 4),
    "unix": lambda: sock(socket.AF_UNIX, socket.SOCK_STREAM),
    "unix_dgram": lambda: sock(socket.AF_UNIX, socket.SOCK_DGRAM),
    "hibits_packet": lambda: sc_close(41, HI | socket.AF_PACKET, socket.SOCK_RAW, 0),
    "hibits_inet_udp": lambda: sc_close(41, HI | socket.AF_INET, socket.SOCK_DGRAM, 0),
    "hibits_mptcp": lambda: sc_close(41, socket.AF_INET, socket.SOCK_STREAM, HI | 262),
    "socketpair": lambda: [s.close() for s in socket.socketpair()],
    "socketpair_raw": lambda: pair(),
    "socketpair_inet": lambda: pair(socket.AF_INET),
    "getaddrinfo": lambda: socket.getaddrinfo("localhost", 80, proto=socket.IPPROTO_TCP),
    # io_uring
    "io_uring_setup": io_uring_setup,
    "io_uring_enter": lambda: sc(426, -1, 0, 0, 0, None, 0),
    "io_uring_register": lambda: sc(427, -1, 0, None, 0),
    # other processes
    "ptrace": lambda: sc(101, 16, 0x3FFFFFF0, 0, 0),  # PTRACE_ATTACH to no process
    "process_vm_readv": lambda: sc(310, 0x3FFFFFF0, None, 0, None, 0, 0),
    "process_vm_writev": lambda: sc(311, 0x3FFFFFF0, None, 0, None, 0, 0),
    "pidfd_getfd": lambda: sc(438, -1, 0, 0),
    # keyrings
    "keyctl": lambda: sc(250, 0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring, no create
    "add_key": lambda: sc(248, b"pysandboxes-no-such-type", b"x", None, 0, -3),
    "request_key": lambda: sc(249, b"user", b"pysandboxes-no-such-key", None, 0),
    # kernel interfaces
    "bpf": lambda: sc(321, 0xFFFF, None, 0),
    "userfaultfd": lambda: sc_close(323, 0),
    "perf_event_open": lambda: sc(298, None, 0, -1, -1, 0),
    # mounts and namespaces
    "mount": lambda: sc(165, b"none", NOWHERE, b"tmpfs", 0, None),
    "umount2": lambda: sc(166, NOWHERE, 0),
    "pivot_root": lambda: sc(155, NOWHERE, NOWHERE),
    "unshare": lambda: sc(272, 0x10000000 | CLONE_PARENT),  # CLONE_NEWUSER with an invalid flag
    "unshare_files": lambda: sc(272, 0x400),  # CLONE_FILES, no namespace: unshare is refused whole
    "setns": lambda: sc(308, -1, 0),
    "fsopen": lambda: sc(430, b"pysandboxes-no-such-fs", 0),
    "fsconfig": lambda: sc(431, -1, 0, None, None, 0),
    "fsmount": lambda: sc(432, -1, 0, 0),
    "fspick": lambda: sc(433, -1, NOWHERE, 0),
    "move_mount": lambda: sc(429, -1, NOWHERE, -1, NOWHERE, 0),
    "open_tree": lambda: sc(428, -100, NOWHERE, 0),
    "open_tree_attr": lambda: sc(467, -100, NOWHERE, 0, None, 0),
    "mount_setattr": lambda: sc(442, -1, b"", 0, None, 0),
    # kernel code
    "kexec_load": lambda: sc(246, 0, 0, None, 0xFFFF0000),
    "kexec_file_load": lambda: sc(320, -1, -1, 0, None, 0xFFFF0000),
    "init_module": lambda: sc(175, None, 0, b""),
    "finit_module": lambda: sc(313, -1, b"", 0),
    "delete_module": lambda: sc(176, b"pysandboxes_no_such_module", 0),
    # file handles
    "open_by_handle_at": lambda: sc(304, -1, None, 0),
    "name_to_handle_at": lambda: sc(303, -100, NOWHERE, None, None, 0),
    # administration
    "swapon": lambda: sc(167, NOWHERE, 0),
    "swapoff": lambda: sc(168, NOWHERE),
    "reboot": lambda: sc(169, 0, 0, 0, None),  # wrong magic numbers
    "acct": lambda: sc(163, NOWHERE),
    "iopl": lambda: sc(172, 0),
    "ioperm": lambda: sc(173, 0, 0, 0),
    "quotactl": lambda: sc(179, 0, None, 0, None),
    "quotactl_fd": lambda: sc(443, -1, 0, 0, None),
    "syslog": lambda: sc(103, 10, None, 0),  # SYSLOG_ACTION_SIZE_BUFFER
    "lookup_dcookie": lambda: sc(212, 0, None, 0),
    # personality
    "personality_query": lambda: sc(135, 0xFFFFFFFF),
    "personality_linux": lambda: personality(0),
    "personality_no_aslr": lambda: personality(0x0040000),
    "personality_rie": lambda: personality(0x0400000),
    "personality_linux32": lambda: personality(8),
    # terminals
    "tiocsti": lambda: fcntl.ioctl(pty(), termios.TIOCSTI, b"x"),
    "tiocsti_hibits": lambda: sc(16, pty(), HI | termios.TIOCSTI, ctypes.c_char_p(b"x")),
    "tioclinux": lambda: fcntl.ioctl(pty(), 0x541C, b"\x00" * 8),
    "tcgets": lambda: termios.tcgetattr(pty()),
    # clone: each namespace flag, with CLONE_THREAD without CLONE_SIGHAND so that the
    # kernel itself refuses the call (EINVAL) when the filter does not
    "clone_newns": lambda: sc(56, 0x00020000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newcgroup": lambda: sc(56, 0x02000000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newuts": lambda: sc(56, 0x04000000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newipc": lambda: sc(56, 0x08000000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newuser": lambda: sc(56, 0x10000000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newpid": lambda: sc(56, 0x20000000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newnet": lambda: sc(56, 0x40000000 | CLONE_THREAD, 0, None, None, 0),
    "clone_newtime": lambda: sc(56, 0x80 | CLONE_THREAD, 0, None, None, 0),
    "clone_plain_invalid": lambda: sc(56, CLONE_THREAD, 0, None, None, 0),
    "clone3": lambda: sc(435, None, 0),
    # what must keep working
    "thread": thread,
    "fork": fork,
    "posix_spawn": spawn,
    "subprocess": lambda: run("/bin/true"),
    "sh": lambda: run("/bin/sh", "-c", "/bin/true && /bin/echo x | /bin/cat >/dev/null"),
    # state
    "seccomp_mode": lambda: status("Seccomp"),
    "no_new_privs": lambda: status("NoNewPrivs"),
    "supervisor_threads": supervisor_threads,
}


# checks that report a value rather than "ok"
VALUES = {"seccomp_mode", "no_new_privs", "supervisor_threads"}


def main():
    names = sys.argv[1:] or list(CHECKS)
    for name in names:
        try:
            result = CHECKS[name]()
            result = str(result) if name in VALUES else "ok"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "OSError:" + str(e)
        except Exception as e:  # noqa: BLE001
            result = type(e).__name__
        print(name, result, flush=True)


main()
