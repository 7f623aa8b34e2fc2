// Package seccomp builds the seccomp filter that the OS providers install under a
// program: a deny list of the system calls and socket kinds that the other layers
// (Landlock, namespaces) cannot see, derived from a few policy-level Options.
//
// A filter is built with libseccomp (github.com/seccomp/libseccomp-golang, which
// needs cgo and libseccomp-dev at build time and libseccomp.so.2 at run time) and
// exported as a raw BPF program: the supervisor installs it on the thread that
// starts the program (see internal/supervise, StageSeccomp), and the bwrap provider
// passes the same bytes with --seccomp FD. Without cgo the package still compiles,
// Available reports why filters cannot be built, and Build fails: a provider that
// needs the filter must then drop the capabilities it would have enforced (fail
// closed, never a silent weakening).
//
// # What the filter refuses
//
// Every system call not listed here is allowed: the filter is a deny list of
// dangerous things, not a whitelist. A refused call fails with EPERM, or kills the
// whole process (SIGSYS) when Options.Kill is set. Exceptions: clone3 always fails
// with ENOSYS (its flags live in memory that seccomp cannot read, and the C library
// and Go then fall back to clone, whose flags it can), and a system call made
// through another ABI than the native one (i386 through int 0x80, x32) always kills
// the process, so that no foreign system call table can go around the rules.
//
//   - socket: every address family but AF_INET, AF_INET6, AF_NETLINK, and AF_UNIX
//     when Options.AllowUnixSockets (so AF_PACKET, AF_VSOCK, AF_ALG, Bluetooth, ...
//     are refused, and so is any family the kernel may add later). For AF_INET and
//     AF_INET6: every type but SOCK_STREAM, and SOCK_DGRAM when Options.AllowUDP
//     (so SOCK_RAW, SOCK_SEQPACKET, ... are refused, and SOCK_PACKET, which the
//     kernel turns into an AF_PACKET socket; SOCK_NONBLOCK and SOCK_CLOEXEC do not
//     matter); with SOCK_STREAM, every protocol but 0 and
//     IPPROTO_TCP, and IPPROTO_MPTCP unless Options.DenyMPTCP (so SCTP and
//     IPPROTO_SMC, which Landlock's TCP rules do not see either, are always
//     refused); with SOCK_DGRAM, every protocol but 0 and IPPROTO_UDP (ICMP "ping"
//     sockets, UDP-Lite). For AF_NETLINK: every protocol but NETLINK_ROUTE, which
//     the C library's getaddrinfo needs.
//   - socketpair: every family but AF_UNIX (AF_UNIX pairs reach nothing outside).
//   - clone: any namespace flag (CLONE_NEWNS, NEWUSER, NEWPID, NEWNET, NEWUTS,
//     NEWIPC, NEWCGROUP, NEWTIME). Threads, fork, vfork and CLONE_PIDFD still work.
//   - ioctl: TIOCSTI (pushing input into a terminal) and TIOCLINUX.
//   - personality: every persona but PER_LINUX (0) and the query 0xffffffff
//     (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ... are refused).
//   - always: io_uring_setup, io_uring_enter, io_uring_register (io_uring makes
//     sockets without socket(2)); ptrace (but PTRACE_TRACEME), process_vm_readv, process_vm_writev,
//     pidfd_getfd; keyctl, add_key, request_key; bpf, userfaultfd,
//     perf_event_open; mount, umount2, pivot_root, unshare, setns, fsopen,
//     fsconfig, fsmount, fspick, move_mount, open_tree, open_tree_attr,
//     mount_setattr; kexec_load, kexec_file_load, init_module, finit_module,
//     delete_module; open_by_handle_at, name_to_handle_at; swapon, swapoff,
//     reboot, acct, iopl, ioperm, quotactl, quotactl_fd, syslog, lookup_dcookie.
//
// A system call argument declared int in the kernel is 32 bits wide, but seccomp
// sees the whole 64-bit register. The filter never lets upper bits hide a refused
// value: a socket family, protocol or persona with any of its upper 32 bits set is
// refused, and the ioctl request and the socket type are compared on the bits the
// kernel reads.
//
// libseccomp ANDs the comparisons of one rule and ORs the rules of one system
// call, and version 2.5 refuses two comparisons of the same argument in one rule
// (no "1 <= x <= 5"). So "x not in {a, b, c}" is written as one rule per aligned
// power-of-two block of each gap between the allowed values (x & mask == value),
// and one rule "x > the largest allowed value".
//
// Rules lists the same, for one set of Options, in words.
package seccomp

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnavailable is wrapped by the errors of Available and Build when seccomp
// filters cannot be built here.
var ErrUnavailable = errors.New("seccomp filters are not available")

// Options derive the filter from the policy.
type Options struct {
	// AllowUDP does not refuse SOCK_DGRAM sockets of AF_INET and AF_INET6 (with
	// protocol 0 or IPPROTO_UDP): a net= rule allows UDP.
	AllowUDP bool
	// DenyMPTCP refuses socket(AF_INET or AF_INET6, SOCK_STREAM, IPPROTO_MPTCP).
	// It is needed whenever Landlock handles TCP: Multipath TCP sockets are not
	// subject to Landlock's TCP rules. Go's net package falls back to plain TCP
	// when an MPTCP socket is refused.
	DenyMPTCP bool
	// AllowUnixSockets does not refuse socket(AF_UNIX, ...). socketpair(AF_UNIX,
	// ...) is always allowed.
	AllowUnixSockets bool
	// ProcessScope refuses what would act on another process by its pid, for
	// providers without a pid namespace: prlimit64, sched_setaffinity,
	// sched_setscheduler, sched_setparam, sched_setattr, migrate_pages and
	// move_pages unless the pid is 0 (the caller), setpriority and ioprio_set
	// unless the target is 0 and is not a user (PRIO_USER, IOPRIO_WHO_USER:
	// every process of the uid).
	ProcessScope bool
	// DenyMetadata refuses every change of a file's metadata: the chmod, chown,
	// utime and set/remove-xattr families, whatever the path. For a program that
	// shares the caller's uid without a read-only view of the host.
	DenyMetadata bool
	// DenyIPC refuses System V IPC (shm*, sem*, msg*) and POSIX message queues
	// (mq_*): objects of the host's IPC namespace, for a program without one of
	// its own.
	DenyIPC bool
	// Minimal builds only the rules of a program that must hold no power over
	// the host's objects, for a tool that does its own filtering (firejail):
	// F_SETLEASE, the file-flag ioctls, and ProcessScope when set. Every other
	// option is ignored.
	Minimal bool
	// Kill kills the process (SIGSYS) on a refused call instead of failing it with
	// EPERM. clone3 still fails with ENOSYS. Programs that probe and fall back die
	// too: glibc's name and user lookups try the nscd socket (AF_UNIX) first, so
	// without AllowUnixSockets a getaddrinfo is fatal under Kill.
	Kill bool
}

// Program is a compiled filter.
type Program struct {
	bpf   []byte
	rules []string
}

// BPF returns the filter as the raw array of struct sock_filter (8 bytes each, in
// native byte order) that libseccomp's ExportBPF writes: what seccomp(2) and
// prctl(PR_SET_SECCOMP) take through a struct sock_fprog, what `bwrap --seccomp FD`
// reads from FD, and what internal/supervise's StageSeccomp installs. The caller
// owns the returned slice.
func (p *Program) BPF() []byte { return slices.Clone(p.bpf) }

// Rules describes what the filter refuses, one rule per line, each ending with
// its effect, for `pysandboxes probe` and debug logs.
func (p *Program) Rules() []string { return slices.Clone(p.rules) }

// Constants of the Linux ABI used by the rules (identical on every architecture
// the kernel supports seccomp filters on, except the ioctl requests, which are the
// generic ones used by x86, arm64 and riscv).
const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16

	sockStream   = 1
	sockDgram    = 2
	sockTypeMask = 0xf

	ipprotoTCP   = 6
	ipprotoUDP   = 17
	ipprotoMPTCP = 262

	netlinkRoute = 0

	tiocsti   = 0x5412
	tioclinux = 0x541c

	// File flags: chattr, whatever the mount or owner lets.
	fsIocSetflags   = 0x40086602
	fsIoc32Setflags = 0x40046602
	fsIocFssetxattr = 0x401c5820

	fSetlease = 1024

	prioUser      = 2
	ioprioWhoUser = 3

	ptraceTraceme = 0
	ptraceDetach  = 17

	perLinux         = 0
	personalityQuery = 0xffffffff
)

// namespaceFlags are the clone flags that create a namespace, with their names.
var namespaceFlags = []struct {
	flag uint64
	name string
}{
	{0x00020000, "CLONE_NEWNS"},
	{0x02000000, "CLONE_NEWCGROUP"},
	{0x04000000, "CLONE_NEWUTS"},
	{0x08000000, "CLONE_NEWIPC"},
	{0x10000000, "CLONE_NEWUSER"},
	{0x20000000, "CLONE_NEWPID"},
	{0x40000000, "CLONE_NEWNET"},
	{0x00000080, "CLONE_NEWTIME"},
}

// alwaysRefused are the system calls refused whatever their arguments, in the
// order of Rules. number is used when libseccomp does not know the name (a system
// call newer than the library); it is the same on every architecture, as for
// every system call numbered from 424 on.
var alwaysRefused = []struct {
	group  string
	names  []string
	number map[string]int
}{
	{group: "io_uring (it makes sockets without socket(2))",
		names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
	{group: "access to other processes",
		names: []string{"process_vm_readv", "process_vm_writev", "pidfd_getfd"}},
	{group: "kernel keyrings", names: []string{"keyctl", "add_key", "request_key"}},
	{group: "kernel interfaces", names: []string{"bpf", "userfaultfd", "perf_event_open"}},
	{group: "mounts and namespaces",
		names: []string{"mount", "umount2", "pivot_root", "unshare", "setns", "fsopen", "fsconfig",
			"fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr", "mount_setattr"},
		number: map[string]int{"open_tree_attr": 467}},
	{group: "kernel code",
		names: []string{"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"}},
	{group: "file handles", names: []string{"open_by_handle_at", "name_to_handle_at"}},
	{group: "system administration",
		names: []string{"swapon", "swapoff", "reboot", "acct", "iopl", "ioperm", "quotactl", "quotactl_fd",
			"syslog", "lookup_dcookie"}},
}

// cmpOp is a comparison of one system call argument.
type cmpOp int

const (
	opEq       cmpOp = iota // arg == val (all 64 bits)
	opGt                    // arg > val (unsigned, all 64 bits)
	opMaskedEq              // arg & mask == val
)

// cmp compares one argument. The comparisons of a rule are ANDed, and a rule has
// at most one comparison per argument (libseccomp 2.5 refuses more).
type cmp struct {
	arg  uint
	op   cmpOp
	mask uint64
	val  uint64
}

// verdict is what a rule does to the call it matches.
type verdict int

const (
	refuse verdict = iota // EPERM, or kill with Options.Kill
	noSys                 // ENOSYS, whatever Options.Kill
)

// rule matches one system call whose arguments pass every comparison. The rules
// of one system call are ORed.
type rule struct {
	name    string
	number  int // used when libseccomp does not know name; 0: none
	verdict verdict
	cmps    []cmp
}

// plan is the filter for o: its rules, and their description.
type plan struct {
	rules []rule
	text  []string
}

func eq(arg uint, v uint64) cmp        { return cmp{arg: arg, op: opEq, val: v} }
func gt(arg uint, v uint64) cmp        { return cmp{arg: arg, op: opGt, val: v} }
func masked(arg uint, m, v uint64) cmp { return cmp{arg: arg, op: opMaskedEq, mask: m, val: v} }

// span returns masked comparisons on arg that, ORed, match exactly the values in
// [lo, hi] when only the bits of within are considered (within is all ones or a
// low mask such as 0xf): the range is cut into aligned power-of-two blocks.
func span(arg uint, lo, hi, within uint64) []cmp {
	var out []cmp
	for lo <= hi {
		size := uint64(1)
		for size*2 != 0 && lo%(size*2) == 0 && size*2-1 <= hi-lo && size*2-1 <= within {
			size *= 2
		}
		if size == 1 && within == ^uint64(0) {
			out = append(out, eq(arg, lo))
		} else {
			out = append(out, masked(arg, within&^(size-1), lo))
		}
		if lo+size-1 == hi {
			break // also ends a range that reaches the top
		}
		lo += size
	}
	return out
}

// notIn returns comparisons on arg that, ORed, match every 64-bit value but those
// of allowed (sorted, distinct): the gaps below the largest, and everything above
// it (which includes every value with one of its upper 32 bits set).
func notIn(arg uint, allowed ...uint64) []cmp {
	var out []cmp
	next := uint64(0)
	for _, a := range allowed {
		if a > next {
			out = append(out, span(arg, next, a-1, ^uint64(0))...)
		}
		next = a + 1
	}
	return append(out, gt(arg, allowed[len(allowed)-1]))
}

// notInType returns comparisons on a socket type argument that, ORed, match every
// type (its low four bits) but those of allowed (sorted, distinct).
func notInType(arg uint, allowed ...uint64) []cmp {
	var out []cmp
	next := uint64(0)
	for _, a := range append(allowed, sockTypeMask+1) {
		if a > next {
			out = append(out, span(arg, next, a-1, sockTypeMask)...)
		}
		next = a + 1
	}
	return out
}

// newPlan derives the filter from o.
func newPlan(o Options) *plan {
	p := &plan{}
	effect := "EPERM"
	if o.Kill {
		effect = "the process is killed (SIGSYS)"
	}
	add := func(name string, cmps ...cmp) {
		p.rules = append(p.rules, rule{name: name, cmps: cmps})
	}
	say := func(format string, args ...any) {
		p.text = append(p.text, fmt.Sprintf(format, args...)+": "+effect)
	}
	if o.Minimal {
		identityRules(o, add, say)
		p.text = append(p.text, "system calls of another architecture (i386 int 0x80, x32): the process is killed (SIGSYS)")
		return p
	}

	// socket(family, type, protocol)
	families := []uint64{afInet, afInet6, afNetlink}
	famNames := "AF_INET, AF_INET6, AF_NETLINK"
	if o.AllowUnixSockets {
		families = []uint64{afUnix, afInet, afInet6, afNetlink}
		famNames = "AF_UNIX, " + famNames
	}
	for _, c := range notIn(0, families...) {
		add("socket", c)
	}
	extra := ""
	if !o.AllowUnixSockets {
		extra = "AF_UNIX, "
	}
	say("socket: every address family but %s (%sAF_PACKET, AF_VSOCK, AF_ALG, AF_BLUETOOTH, ...)", famNames, extra)

	types, typeNames, refusedTypes := []uint64{sockStream}, "SOCK_STREAM", "SOCK_DGRAM, SOCK_RAW"
	if o.AllowUDP {
		types, typeNames, refusedTypes = []uint64{sockStream, sockDgram}, "SOCK_STREAM, SOCK_DGRAM", "SOCK_RAW"
	}
	stream, streamNames, refusedStream := []uint64{0, ipprotoTCP, ipprotoMPTCP}, "0, IPPROTO_TCP, IPPROTO_MPTCP", ""
	if o.DenyMPTCP {
		stream, streamNames, refusedStream = []uint64{0, ipprotoTCP}, "0, IPPROTO_TCP", "IPPROTO_MPTCP, "
	}
	for _, fam := range []uint64{afInet, afInet6} {
		for _, c := range notInType(1, types...) {
			add("socket", eq(0, fam), c)
		}
		for _, c := range notIn(2, stream...) {
			add("socket", eq(0, fam), masked(1, sockTypeMask, sockStream), c)
		}
		if o.AllowUDP {
			for _, c := range notIn(2, 0, ipprotoUDP) {
				add("socket", eq(0, fam), masked(1, sockTypeMask, sockDgram), c)
			}
		}
	}
	say("socket(AF_INET, AF_INET6): every type but %s (%s, SOCK_PACKET, SOCK_SEQPACKET, ...)", typeNames, refusedTypes)
	say("socket(AF_INET, AF_INET6, SOCK_STREAM): every protocol but %s (%sIPPROTO_SCTP, IPPROTO_SMC, ...)", streamNames, refusedStream)
	if o.AllowUDP {
		say("socket(AF_INET, AF_INET6, SOCK_DGRAM): every protocol but 0, IPPROTO_UDP (ICMP ping sockets, UDP-Lite, ...)")
	}
	add("socket", eq(0, afNetlink), gt(2, netlinkRoute))
	say("socket(AF_NETLINK): every protocol but NETLINK_ROUTE")

	for _, c := range notIn(0, afUnix) {
		add("socketpair", c)
	}
	say("socketpair: every address family but AF_UNIX")

	var nsNames []string
	for _, ns := range namespaceFlags {
		add("clone", masked(0, ns.flag, ns.flag))
		nsNames = append(nsNames, ns.name)
	}
	say("clone: with any namespace flag (%s)", strings.Join(nsNames, ", "))
	p.rules = append(p.rules, rule{name: "clone3", verdict: noSys})
	p.text = append(p.text, "clone3: always (its flags are out of seccomp's sight; callers fall back to clone): ENOSYS")

	// PTRACE_TRACEME (0) only lets the caller's parent trace it, and PTRACE_DETACH
	// (17) only releases a tracee the caller already has: the supervisor uses both to
	// stop the program at exec, set its resource limits and let it go, from the
	// thread that carries this filter. Nothing can be attached to (attach, seize) nor
	// inspected (peek, poke, ...).
	for _, c := range notIn(0, ptraceTraceme, ptraceDetach) {
		add("ptrace", c)
	}
	say("ptrace: every request but PTRACE_TRACEME and PTRACE_DETACH")

	add("ioctl", masked(1, 0xffffffff, tiocsti))
	add("ioctl", masked(1, 0xffffffff, tioclinux))
	say("ioctl: TIOCSTI, TIOCLINUX")
	identityRules(o, add, say)

	if o.DenyMetadata {
		names := []string{"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
			"utime", "utimes", "futimesat", "utimensat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
			"lremovexattr", "fremovexattr", "setxattrat", "removexattrat"}
		numbers := map[string]int{"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}
		for _, name := range names {
			p.rules = append(p.rules, rule{name: name, number: numbers[name]})
		}
		say("metadata changes, always: %s", strings.Join(names, ", "))
	}
	if o.DenyIPC {
		names := []string{"shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop", "semctl",
			"msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
			"mq_notify", "mq_getsetattr"}
		for _, name := range names {
			p.rules = append(p.rules, rule{name: name})
		}
		say("System V IPC and POSIX message queues of the host, always: %s", strings.Join(names, ", "))
	}

	for _, c := range notIn(0, perLinux, personalityQuery) {
		add("personality", c)
	}
	say("personality: every persona but PER_LINUX (0) and the query 0xffffffff (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...)")

	for _, g := range alwaysRefused {
		for _, name := range g.names {
			p.rules = append(p.rules, rule{name: name, number: g.number[name]})
		}
		say("%s, always: %s", g.group, strings.Join(g.names, ", "))
	}
	p.text = append(p.text, "system calls of another architecture (i386 int 0x80, x32): the process is killed (SIGSYS)")
	return p
}

// identityRules adds the rules that keep a program from holding power over the
// host's objects: file flags (chattr) and leases of the files it can open, and
// with ProcessScope the processes it could name by pid.
func identityRules(o Options, add func(string, ...cmp), say func(string, ...any)) {
	add("ioctl", masked(1, 0xffffffff, fsIocSetflags))
	add("ioctl", masked(1, 0xffffffff, fsIoc32Setflags))
	add("ioctl", masked(1, 0xffffffff, fsIocFssetxattr))
	say("ioctl: FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR (file flags)")

	// A lease on a file the program owns (an exposed one) would hold the host's
	// processes that open it for up to lease-break-time.
	add("fcntl", masked(1, 0xffffffff, fSetlease))
	say("fcntl: F_SETLEASE")

	if o.ProcessScope {
		for _, name := range []string{"prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
			"sched_setattr", "migrate_pages", "move_pages"} {
			add(name, gt(0, 0))
		}
		say("prlimit64, sched_setaffinity, sched_setscheduler, sched_setparam, sched_setattr, migrate_pages, move_pages: " +
			"of a pid other than 0 (the caller)")
		add("setpriority", masked(0, 0xffffffff, prioUser))
		add("setpriority", gt(1, 0))
		add("ioprio_set", masked(0, 0xffffffff, ioprioWhoUser))
		add("ioprio_set", gt(1, 0))
		say("setpriority, ioprio_set: of a user, or of a target other than 0 (the caller)")
	}
}
