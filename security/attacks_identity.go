package security

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"golang.org/x/sys/unix"
)

// The attacks of a program that would hold the host's identity: the host's root
// (owner of its files and sysctls), or the host user's uid with its same-uid
// powers over the host's processes (resource limits, scheduling) and IPC objects.

// waitGo is a program fragment: it writes "ready" to the file sys.argv[1] and
// waits (10 s at most) until the host has written the file sys.argv[2].
const waitGo = `
def wait_go(ready, go):
    with open(ready, "w") as f:
        f.write("ready")
    import time
    for _ in range(1000):
        if os.path.exists(go):
            return
        time.sleep(0.01)
`

// hostWait waits until the program wrote ready (10 s at most).
func hostWait(ready string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return true
		}
	}
	return false
}

var hostUID = &Attack{
	Name: "host-uid", Capability: pysandboxes.CapIdentity, Privileged: true,
	Summary: "run as the host's root: the program's real, effective, saved and file-system uids as the host sees them (/proc/<pid>/status)",
	setup: func(e *env) *plan {
		rw := e.dir("rw")
		ready, gone := filepath.Join(rw, "ready"), filepath.Join(rw, "go")
		token := "pysb-host-uid-" + e.mark
		var seen, vms []string
		var root bool
		return &plan{
			rules: []string{"expose-rw=" + rw},
			argv: e.py(waitGo+`
wait_go(sys.argv[1], sys.argv[2])
print("program", "OK", sys.argv[3])
`, ready, gone, token),
			check: func(r *runResult) (outcome, string) {
				if r.err != nil {
					return outUnclear, fmt.Sprintf("the program failed: %v: %s", r.err, excerpt(r.out, 300))
				}
				if len(seen) == 0 && len(vms) > 0 {
					// A VM: the program is a process of the guest's kernel, whose
					// uids are the guest's; no process of the host runs it.
					return outBlocked, "no process of the host runs the program (it runs in the guest's kernel); the VM: " + strings.Join(vms, "; ")
				}
				if len(seen) == 0 {
					return outUnclear, "the host found no process of the program"
				}
				if root {
					return outThrough, "the program holds the host's uid 0: " + strings.Join(seen, "; ")
				}
				return outBlocked, "the program's uids on the host: " + strings.Join(seen, "; ")
			},
			during: func() {
				defer os.WriteFile(gone, nil, 0o644)
				if !hostWait(ready) {
					return
				}
				python := e.python()
				vms = vmProcesses(e.root)
				for _, pid := range marked(e.mark) {
					cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
					exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
					if !bytes.Contains(cmdline, []byte(token)) || exe != python {
						continue // the supervisor or the sandboxing tool (firejail), not the program
					}
					status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
					for _, l := range strings.Split(string(status), "\n") {
						if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" {
							seen = append(seen, fmt.Sprintf("pid %d uids %s", pid, strings.Join(f[1:], " ")))
							for _, u := range f[1:] {
								root = root || u == "0"
							}
						}
					}
				}
			},
		}
	},
}

// vmProcesses describes the host's QEMU processes whose command line names
// path (the VMs sharing it), with their uids.
func vmProcesses(path string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || !isQEMU(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if !bytes.Contains(cmdline, []byte(path)) {
			continue
		}
		status, _ := os.ReadFile("/proc/" + ent.Name() + "/status")
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[0] == "Uid:" {
				out = append(out, fmt.Sprintf("QEMU pid %d uids %s", pid, strings.Join(f[1:], " ")))
			}
		}
	}
	return out
}

// isQEMU reports whether pid runs a QEMU system emulator.
func isQEMU(pid int) bool {
	comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.HasPrefix(string(comm), "qemu-system")
}

// hostDecides is the check of attacks whose calls may succeed without harm (they
// reached only the sandbox's own processes): "through" when one succeeded, for
// the host's check (sinkDecides) to decide; "blocked" when every one was refused.
func hostDecides(labels ...string) func(r *runResult) (outcome, string) {
	return func(r *runResult) (outcome, string) {
		if r.err != nil {
			return outUnclear, fmt.Sprintf("the program failed: %v: %s", r.err, excerpt(r.out, 600))
		}
		lines := parseLines(r.out)
		var ok []string
		for _, l := range labels {
			st, found := lines[l]
			if !found {
				return outUnclear, fmt.Sprintf("no result for %q in: %s", l, excerpt(r.out, 600))
			}
			if st.status == "OK" {
				ok = append(ok, l)
			}
		}
		if len(ok) > 0 {
			return outThrough, strings.Join(ok, ", ") + " succeeded"
		}
		return outBlocked, excerpt(r.out, 300)
	}
}

// limitsOf reads the limits of a process (/proc/<pid>/limits).
func limitsOf(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	return string(b)
}

var prlimitHost = &Attack{
	Name: "prlimit-host", Capability: pysandboxes.CapIdentity,
	Summary: "set the resource limits of a host process of the host's uid (prlimit: RLIMIT_NOFILE and RLIMIT_CORE)",
	setup: func(e *env) *plan {
		victim := e.sleeper()
		if e.err != nil {
			return nil
		}
		pid := victim.Process.Pid
		before := limitsOf(pid)
		return &plan{
			argv: e.py(`
import resource
pid = int(sys.argv[1])
attempt("nofile", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3)))
attempt("core", lambda: resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0)))
attempt("read", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE))
`, strconv.Itoa(pid)),
			check:       probes(deny("nofile", procDenied...), deny("core", procDenied...), deny("read", procDenied...)),
			sinkDecides: true,
			host: func() (bool, string) {
				if after := limitsOf(pid); after != before {
					return true, "the host process's limits changed"
				}
				return false, "the host process's limits did not change"
			},
		}
	},
}

// schedOf reads the nice value and the CPUs of a process.
func schedOf(pid int) string {
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	nice := ""
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
		if f := strings.Fields(string(stat[i+1:])); len(f) > 16 {
			nice = f[16]
		}
	}
	status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	cpus := ""
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Cpus_allowed_list:") {
			cpus = strings.TrimSpace(strings.TrimPrefix(l, "Cpus_allowed_list:"))
		}
	}
	return "nice " + nice + ", cpus " + cpus
}

var schedHost = &Attack{
	Name: "sched-host", Capability: pysandboxes.CapIdentity,
	Summary: "change the priority, I/O priority and CPU affinity of a host process of the host's uid",
	setup: func(e *env) *plan {
		victim := e.sleeper()
		if e.err != nil {
			return nil
		}
		pid := victim.Process.Pid
		before := schedOf(pid)
		return &plan{
			argv: e.py(ctypesPrelude+`
pid = int(sys.argv[1])
attempt("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
attempt("affinity", lambda: os.sched_setaffinity(pid, {0}))
attempt("scheduler", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)))
# ioprio_set(IOPRIO_WHO_PROCESS, pid, IOPRIO_CLASS_IDLE << 13)
attempt("ioprio", lambda: check(libc.syscall(251, 1, pid, 3 << 13)))
`, strconv.Itoa(pid)),
			check: probes(deny("nice", procDenied...), deny("affinity", procDenied...), deny("scheduler", procDenied...),
				deny("ioprio", procDenied...)),
			sinkDecides: true,
			host: func() (bool, string) {
				if after := schedOf(pid); after != before {
					return true, fmt.Sprintf("the host process's scheduling changed: %s, then %s", before, after)
				}
				return false, "the host process's scheduling did not change (" + before + ")"
			},
		}
	},
}

var priorityUser = &Attack{
	Name: "priority-user", Capability: pysandboxes.CapIdentity, Destructive: true,
	Summary: "lower the priority of every process of the program's uid (setpriority and ioprio_set of a user)",
	setup: func(e *env) *plan {
		victim := e.sleeper()
		if e.err != nil {
			return nil
		}
		pid := victim.Process.Pid
		before := schedOf(pid)
		return &plan{
			argv: e.py(ctypesPrelude + `
attempt("nice-user", lambda: os.setpriority(os.PRIO_USER, 0, 19))
# ioprio_set(IOPRIO_WHO_USER, 0, IOPRIO_CLASS_IDLE << 13)
attempt("ioprio-user", lambda: check(libc.syscall(251, 3, 0, 3 << 13)))
`),
			// In a pid namespace of its own these calls reach the sandbox's
			// processes only: what the host's process shows decides.
			check:       hostDecides("nice-user", "ioprio-user"),
			sinkDecides: true,
			host: func() (bool, string) {
				if after := schedOf(pid); after != before {
					return true, fmt.Sprintf("a host process's priority changed: %s, then %s", before, after)
				}
				return false, "the host process's priority did not change (" + before + ")"
			},
		}
	},
}

var sysvHost = &Attack{
	Name: "sysv-ipc-host", Capability: pysandboxes.CapIdentity,
	Summary: "reach a System V shared memory segment of the host's uid (shmget by key, then remove it)",
	setup: func(e *env) *plan {
		key := int(time.Now().UnixNano()&0x3fffffff) | 0x1000
		id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
		if err != nil {
			e.skipf("no System V shared memory here: %v", err)
			return &plan{}
		}
		e.cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
		return &plan{
			argv: e.py(ctypesPrelude+`
key = int(sys.argv[1])
def get():
    return check(libc.shmget(key, 0, 0))
attempt("shmget", get)
attempt("rmid", lambda: check(libc.shmctl(get(), 0, None)))
`, strconv.Itoa(key)),
			check: probes(deny("shmget", metaDenied...), deny("rmid", metaDenied...)),
			host: func() (bool, string) {
				var ds unix.SysvShmDesc
				if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds); err != nil {
					return true, "the host's segment is gone: " + err.Error()
				}
				return false, "the host's segment is still there"
			},
			sinkDecides: true,
		}
	},
}

var leaseExposed = &Attack{
	Name: "lease-exposed", Capability: pysandboxes.CapIdentity,
	Summary: "take a lease on an exposed file of the host (which would hold the host's writers of it for lease-break-time)",
	setup: func(e *env) *plan {
		ro := e.dir("ro")
		target := e.file("shared", "ro", "shared.txt")
		return &plan{
			rules: []string{"expose-ro=" + ro},
			argv: e.py(`
import fcntl
def lease():
    fd = os.open(sys.argv[1], os.O_RDONLY)
    try:
        return fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    finally:
        os.close(fd)
attempt("lease", lease)
`, target),
			check: probes(deny("lease", "EACCES", "EPERM", "EAGAIN", "EINVAL")),
		}
	},
}

// identityAttacks are the attacks of a program holding a host identity.
var identityAttacks = []*Attack{hostUID, prlimitHost, schedHost, priorityUser, sysvHost, leaseExposed, keyringHost}

var keyringHost = &Attack{
	Name: "keyring-host", Capability: pysandboxes.CapIdentity,
	Summary: "read a key of the host uid's user keyring (@u) by its name, and plant one there for the host's later processes",
	setup: func(e *env) *plan {
		tag := strconv.FormatInt(time.Now().UnixNano(), 36)
		secret, planted := "pysb-corpus-secret-"+tag, "pysb-corpus-planted-"+tag
		id, err := unix.AddKey("user", secret, []byte("SECRET-"+tag), unix.KEY_SPEC_USER_KEYRING)
		if err != nil {
			e.skipf("no user keyring here: %v", err)
			return &plan{}
		}
		e.cleanup(func() {
			unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
			if k, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", planted, 0); err == nil {
				unix.KeyctlInt(unix.KEYCTL_INVALIDATE, k, 0, 0, 0)
			}
		})
		return &plan{
			argv: e.py(ctypesPrelude+`
secret, planted = sys.argv[1], sys.argv[2]
def read():
    k = check(libc.syscall(250, 10, ctypes.c_int(-4), b"user", secret.encode(), 0))  # KEYCTL_SEARCH @u
    buf = ctypes.create_string_buffer(256)
    n = check(libc.syscall(250, 11, k, buf, 256))  # KEYCTL_READ
    return buf.raw[:n].decode()
attempt("read", read)
attempt("plant", lambda: check(libc.syscall(248, b"user", planted.encode(), b"x", 1, ctypes.c_int(-4))))  # add_key @u
`, secret, planted),
			// ENOKEY: the program's @u is not the host's (or, in a VM whose key
			// quotas are spent, no user keyring can be made for its uid);
			// EDQUOT: no key can be added at all.
			check: probes(deny("read", "ENOKEY", "EACCES", "EPERM", "ENOSYS"), deny("plant", "EDQUOT", "ENOKEY", "EACCES", "EPERM", "ENOSYS")),
			host: func() (bool, string) {
				if _, err := unix.KeyctlSearch(unix.KEY_SPEC_USER_KEYRING, "user", planted, 0); err == nil {
					return true, "the program's key is in the host uid's user keyring"
				}
				return false, "the host uid's user keyring holds no key of the program"
			},
		}
	},
}
