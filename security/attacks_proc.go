package security

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/pysandboxes/pysandboxes"
	"golang.org/x/sys/unix"
)

// The attacks on other processes (the host, processes outside the sandbox) and on
// the kernel (privileged system calls).

// secretInMemory puts the run's secret in a buffer of the host's memory and
// returns its address (the Go heap does not move objects).
func (e *env) secretInMemory() uintptr {
	buf := []byte(e.secret)
	e.cleanup(func() { runtime.KeepAlive(buf) })
	return uintptr(unsafe.Pointer(&buf[0]))
}

// ctypesPrelude loads the C library and defines check(r), which raises the errno
// of a failed call.
const ctypesPrelude = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def check(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
`

const memReader = `
pid, addr, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def mem():
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(addr)
        return f.read(n).decode(errors="replace")
`

var procEnviron = &Attack{
	Name: "proc-host-environ", Capability: pysandboxes.CapFilesRead,
	Summary: "read /proc/<host pid>/environ (nothing of /proc exposed)",
	setup: func(e *env) *plan {
		return &plan{
			argv:  e.py(`attempt("environ", lambda: len(read("/proc/%s/environ" % sys.argv[1])))`, strconv.Itoa(os.Getpid())),
			check: probes(deny("environ", procDenied...)),
		}
	},
}

var procMem = &Attack{
	Name: "proc-host-mem", Capability: pysandboxes.CapFilesRead,
	Summary: "read a secret in the host's memory through /proc/<host pid>/mem (nothing of /proc exposed)",
	setup: func(e *env) *plan {
		addr := e.secretInMemory()
		return &plan{
			argv: e.py(memReader+`attempt("mem", mem)`,
				strconv.Itoa(os.Getpid()), strconv.FormatUint(uint64(addr), 10), strconv.Itoa(len(e.secret))),
			check: probes(deny("mem", procDenied...)),
		}
	},
}

var procExposed = &Attack{
	Name: "proc-host-exposed", Capability: pysandboxes.CapSignals,
	Summary: "with /proc exposed: read the host's environ and the secret in its memory through /proc/<host pid>/mem",
	setup: func(e *env) *plan {
		addr := e.secretInMemory()
		return &plan{
			rules: []string{"expose-ro=/proc"},
			argv: e.py(memReader+`
attempt("own", lambda: read("/proc/self/status")[:5])
attempt("environ", lambda: len(read("/proc/%d/environ" % pid)))
attempt("mem", mem)
`, strconv.Itoa(os.Getpid()), strconv.FormatUint(uint64(addr), 10), strconv.Itoa(len(e.secret))),
			check: probes(control("own"), deny("environ", procDenied...), deny("mem", procDenied...)),
		}
	},
}

var processVMReadv = &Attack{
	Name: "process-vm-readv", Capability: pysandboxes.CapSignals,
	Summary: "read the secret in the host's memory with process_vm_readv",
	setup: func(e *env) *plan {
		addr := e.secretInMemory()
		return &plan{
			argv: e.py(ctypesPrelude+`
pid, addr, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def vmread():
    buf = ctypes.create_string_buffer(n)
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), n), iovec(addr, n)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    got = check(libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
    return buf.raw[:got].decode(errors="replace")
attempt("readv", vmread)
`, strconv.Itoa(os.Getpid()), strconv.FormatUint(uint64(addr), 10), strconv.Itoa(len(e.secret))),
			check: probes(deny("readv", procDenied...)),
		}
	},
}

var ptraceAttach = &Attack{
	Name: "ptrace-outside", Capability: pysandboxes.CapSignals,
	Summary: "ptrace (seize, attach) processes outside the sandbox",
	setup: func(e *env) *plan {
		a, b := e.sleeper(), e.sleeper()
		if e.err != nil {
			return nil
		}
		return &plan{
			argv: e.py(ctypesPrelude+`
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
def ptrace(req, pid):
    return check(libc.ptrace(req, pid, None, None))
attempt("seize", lambda: ptrace(0x4206, int(sys.argv[1])))
attempt("attach", lambda: ptrace(16, int(sys.argv[2])))
`, strconv.Itoa(a.Process.Pid), strconv.Itoa(b.Process.Pid)),
			check: probes(deny("seize", procDenied...), deny("attach", procDenied...)),
		}
	},
}

var killOutside = &Attack{
	Name: "kill-outside", Capability: pysandboxes.CapSignals,
	Summary: "send SIGTERM to a process outside the sandbox",
	setup: func(e *env) *plan {
		victim := e.sleeper()
		if e.err != nil {
			return nil
		}
		pid := victim.Process.Pid
		return &plan{
			argv:  e.py(`attempt("kill", lambda: os.kill(int(sys.argv[1]), 15))`, strconv.Itoa(pid)),
			check: probes(deny("kill", "EPERM", "ESRCH")),
			host: func() (bool, string) {
				for range 20 {
					if !alive(pid) {
						return true, "the process outside was killed"
					}
					time.Sleep(10 * time.Millisecond)
				}
				return false, "the process outside still runs"
			},
		}
	},
}

var inheritedFDs = &Attack{
	Name: "inherited-fds", Capability: 0,
	Summary: "use a descriptor of the host: the secret file open in the host without close-on-exec, as descriptors a host inherits from its own parent are",
	setup: func(e *env) *plan {
		f, err := os.Open(e.secretFile())
		if err != nil {
			e.fail(err)
			return nil
		}
		e.cleanup(func() { f.Close() })
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
			e.fail(err)
			return nil
		}
		return &plan{
			argv: e.py(`
found = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
    except OSError:
        continue
    try:
        found.append((fd, os.pread(fd, 100, 0)))
    except OSError as e:
        found.append((fd, errno.errorcode.get(e.errno)))
print("fds", "OK %r" % found if found else "NONE")
`),
			check: probes(deny("fds", "NONE")),
		}
	},
}

var mountAttack = &Attack{
	Name: "mount", Capability: pysandboxes.CapSeccomp, Privileged: true,
	Summary: "mount(2) (harmless: no file system type, so EINVAL once the privilege checks pass)",
	setup: func(e *env) *plan {
		return &plan{
			argv: e.py(ctypesPrelude + `
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
attempt("mount", lambda: check(libc.mount(None, b"/", None, 0, None)))
`),
			check: probes(probe{label: "mount", deny: []string{"EPERM"}, through: []string{"EINVAL"}}),
		}
	},
}

var unshareAttack = &Attack{
	Name: "unshare", Capability: pysandboxes.CapSeccomp,
	Summary: "unshare(CLONE_NEWUSER|CLONE_NEWNS): new namespaces, where a program is root again",
	setup: func(e *env) *plan {
		return &plan{
			argv: e.py(ctypesPrelude + `
attempt("unshare", lambda: check(libc.unshare(0x10000000 | 0x00020000)))
`),
			check: probes(deny("unshare", "EPERM")),
		}
	},
}

var setnsAttack = &Attack{
	Name: "setns", Capability: pysandboxes.CapSeccomp, Privileged: true,
	Summary: "setns(2) (harmless: into its own UTS namespace, through a pidfd)",
	setup: func(e *env) *plan {
		return &plan{
			argv: e.py(ctypesPrelude + `
def setns():
    fd = os.pidfd_open(os.getpid())
    try:
        return check(libc.setns(fd, 0x04000000))
    finally:
        os.close(fd)
attempt("setns", setns)
`),
			check: probes(deny("setns", "EPERM")),
		}
	},
}

var ioUring = &Attack{
	Name: "io-uring", Capability: pysandboxes.CapSeccomp,
	Summary: "io_uring_setup (io_uring makes sockets and opens files without the system calls filters see)",
	setup: func(e *env) *plan {
		if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil {
			if v := strings.TrimSpace(string(b)); v == "2" || (v == "1" && os.Geteuid() != 0) {
				e.skipf("io_uring is disabled on this host (kernel.io_uring_disabled=%s)", v)
			}
		}
		return &plan{
			argv: e.py(ctypesPrelude + `
libc.syscall.restype = ctypes.c_long
def setup():
    params = ctypes.create_string_buffer(120)
    fd = check(libc.syscall(ctypes.c_long(425), ctypes.c_uint(1), params))
    os.close(fd)
    return "ring"
attempt("setup", setup)
`),
			check: probes(deny("setup", "EPERM")),
		}
	},
}

var setuidAttack = &Attack{
	Name: "setuid", Capability: pysandboxes.CapNoPrivileges,
	Summary: "run a setuid-root copy of python3 (exposed) and look at its effective capabilities (CapEff)",
	setup: func(e *env) *plan {
		if os.Geteuid() != 0 {
			e.skipf("needs root: only root can make the setuid-root copy of python3")
			return nil
		}
		py := e.python()
		dir := e.dir("suid")
		copyFile(e, py, filepath.Join(dir, "python3"))
		e.fail(os.Chmod(filepath.Join(dir, "python3"), 0o4755))
		return &plan{
			rules: []string{"expose-ro=" + dir, "expose-ro=/proc"},
			argv: e.py(`
import subprocess
inner = "for l in open('/proc/self/status'):\n    if l.startswith('CapEff:'): print('capeff', l.split()[1])\n"
r = subprocess.run([sys.argv[1], "-I", "-S", "-c", inner], capture_output=True, text=True)
print(r.stdout.strip() or "capeff FAILED %d %s" % (r.returncode, r.stderr.strip()[-300:]))
`, filepath.Join(dir, "python3")),
			check: func(r *runResult) (outcome, string) {
				if r.err != nil {
					return outUnclear, fmt.Sprintf("the program failed: %v: %s", r.err, excerpt(r.out, 400))
				}
				l, ok := parseLines(r.out)["capeff"]
				if !ok {
					return outUnclear, "no CapEff in: " + excerpt(r.out, 400)
				}
				v, err := strconv.ParseUint(l.status, 16, 64)
				switch {
				case err != nil:
					return outUnclear, "CapEff: " + l.status + " " + l.rest
				case v == 0:
					return outBlocked, "CapEff 0 in the setuid-root program"
				}
				return outThrough, "CapEff " + l.status + " in the setuid-root program"
			},
		}
	},
}

func copyFile(e *env, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		e.fail(err)
		return
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		e.fail(err)
		return
	}
	_, err = io.Copy(out, in)
	e.fail(err)
	e.fail(out.Close())
}

var sethostname = &Attack{
	Name: "sethostname", Capability: pysandboxes.CapNoPrivileges, Privileged: true,
	Summary: "reconfigure the host as root: sethostname (to the same name: harmless)",
	setup: func(e *env) *plan {
		return &plan{
			argv:  e.py(`attempt("sethostname", lambda: socket.sethostname(socket.gethostname()))`),
			check: probes(deny("sethostname", "EPERM")),
		}
	},
}

// procAttacks are the attacks on other processes and on the kernel.
var procAttacks = []*Attack{procEnviron, procMem, procExposed, processVMReadv, ptraceAttach, killOutside, inheritedFDs,
	mountAttack, unshareAttack, setnsAttack, ioUring, setuidAttack, sethostname}
