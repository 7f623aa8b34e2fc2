//go:build linux && cgo

package seccomp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// This file checks the BPF that Build exports, instruction by instruction, with a
// small interpreter of classic BPF as the kernel runs it for seccomp: the same bytes
// the supervisor installs. The tests of process_test.go run real programs under it.

// Return values of a seccomp filter (SECCOMP_RET_*).
const (
	retKillProcess = 0x80000000
	retKillThread  = 0x00000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000
	retActionMask  = 0xffff0000
	retDataMask    = 0x0000ffff
)

// Audit architectures.
const (
	auditArchX86_64 = 0xc000003e
	auditArchI386   = 0x40000003
	x32SyscallBit   = 0x40000000
)

// seccompData is struct seccomp_data.
type seccompData struct {
	nr   int32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d *seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.NativeEndian.PutUint32(b[0:], uint32(d.nr))
	binary.NativeEndian.PutUint32(b[4:], d.arch)
	binary.NativeEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

func decode(t testing.TB, bpf []byte) []insn {
	t.Helper()
	if len(bpf) == 0 || len(bpf)%8 != 0 {
		t.Fatalf("BPF of %d bytes", len(bpf))
	}
	prog := make([]insn, len(bpf)/8)
	for i := range prog {
		b := bpf[8*i:]
		prog[i] = insn{binary.NativeEndian.Uint16(b), b[2], b[3], binary.NativeEndian.Uint32(b[4:])}
	}
	return prog
}

// run interprets prog on d as the kernel would, returning the filter's value and
// the number of instructions executed. It fails on anything the kernel's checker
// would refuse at run time (a read outside seccomp_data, a jump past the end).
func run(t testing.TB, prog []insn, d *seccompData) (uint32, int) {
	t.Helper()
	data := d.bytes()
	var a, x uint32
	var mem [16]uint32
	steps := 0
	for pc := 0; ; pc++ {
		if pc >= len(prog) {
			t.Fatalf("pc %d runs past the end of the program", pc)
		}
		steps++
		in := prog[pc]
		switch in.code & 0x07 {
		case 0x00, 0x01: // BPF_LD, BPF_LDX
			var v uint32
			switch in.code & 0xe0 {
			case 0x00: // BPF_IMM
				v = in.k
			case 0x20: // BPF_ABS
				if in.code&0x18 != 0x00 || in.k%4 != 0 || in.k+4 > 64 {
					t.Fatalf("pc %d: bad load %#x of %#x", pc, in.code, in.k)
				}
				v = binary.NativeEndian.Uint32(data[in.k:])
			case 0x60: // BPF_MEM
				v = mem[in.k]
			case 0x80: // BPF_LEN
				v = 64
			default:
				t.Fatalf("pc %d: unsupported load %#x", pc, in.code)
			}
			if in.code&0x07 == 0x00 {
				a = v
			} else {
				x = v
			}
		case 0x02: // BPF_ST
			mem[in.k] = a
		case 0x03: // BPF_STX
			mem[in.k] = x
		case 0x04: // BPF_ALU
			src := in.k
			if in.code&0x08 != 0 {
				src = x
			}
			switch in.code & 0xf0 {
			case 0x00:
				a += src
			case 0x10:
				a -= src
			case 0x20:
				a *= src
			case 0x30:
				a /= src
			case 0x40:
				a |= src
			case 0x50:
				a &= src
			case 0x60:
				a <<= src
			case 0x70:
				a >>= src
			case 0x80:
				a = -a
			case 0x90:
				a %= src
			case 0xa0:
				a ^= src
			default:
				t.Fatalf("pc %d: unsupported ALU %#x", pc, in.code)
			}
		case 0x05: // BPF_JMP
			src := in.k
			if in.code&0x08 != 0 {
				src = x
			}
			var cond bool
			switch in.code & 0xf0 {
			case 0x00: // BPF_JA
				pc += int(in.k)
				continue
			case 0x10:
				cond = a == src
			case 0x20:
				cond = a > src
			case 0x30:
				cond = a >= src
			case 0x40:
				cond = a&src != 0
			default:
				t.Fatalf("pc %d: unsupported jump %#x", pc, in.code)
			}
			if cond {
				pc += int(in.jt)
			} else {
				pc += int(in.jf)
			}
		case 0x06: // BPF_RET
			if in.code&0x18 == 0x10 {
				return a, steps
			}
			return in.k, steps
		case 0x07: // BPF_MISC
			if in.code&0xf8 == 0x00 {
				x = a
			} else {
				a = x
			}
		}
	}
}

func mustBuild(t testing.TB, o Options) *Program {
	t.Helper()
	p, err := Build(o)
	if err != nil {
		t.Fatalf("Build(%+v): %v", o, err)
	}
	return p
}

// allOptions are the 16 combinations of Options.
func allOptions() []Options {
	var out []Options
	for i := range 16 {
		out = append(out, Options{AllowUDP: i&1 != 0, DenyMPTCP: i&2 != 0, AllowUnixSockets: i&4 != 0, Kill: i&8 != 0})
	}
	return out
}

func nativeOnly(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the interpreter tests use x86_64 system call numbers (this is %s)", runtime.GOARCH)
	}
}

func TestAvailable(t *testing.T) {
	if err := Available(); err != nil {
		t.Fatalf("Available: %v (cgo build with libseccomp-dev installed)", err)
	}
}

func TestBuildDeterministic(t *testing.T) {
	seen := map[string]Options{}
	for _, o := range allOptions() {
		p1 := mustBuild(t, o)
		p2 := mustBuild(t, o)
		b := p1.BPF()
		if len(b) == 0 || len(b)%8 != 0 || len(b)/8 > maxInstructions {
			t.Fatalf("%+v: BPF of %d bytes", o, len(b))
		}
		if !bytes.Equal(b, p2.BPF()) {
			t.Errorf("%+v: two builds differ", o)
		}
		if prev, dup := seen[string(b)]; dup {
			t.Errorf("%+v and %+v give the same filter", prev, o)
		}
		seen[string(b)] = o
		b[0] ^= 0xff
		if bytes.Equal(b, p1.BPF()) {
			t.Errorf("BPF returns the program's own storage")
		}
		t.Logf("%+v: %d instructions", o, len(b)/8)
	}
}

func TestRules(t *testing.T) {
	all := strings.Join(mustBuild(t, Options{}).Rules(), "\n")
	want := []string{"AF_PACKET", "AF_UNIX", "SOCK_RAW", "SOCK_DGRAM", "IPPROTO_SCTP", "NETLINK_ROUTE",
		"socketpair", "CLONE_NEWUSER", "CLONE_NEWTIME", "clone3", "ENOSYS", "TIOCSTI", "TIOCLINUX",
		"personality", "READ_IMPLIES_EXEC", "i386", "x32", "SIGSYS", "EPERM"}
	for _, g := range alwaysRefused {
		want = append(want, g.names...)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("Rules() does not mention %s:\n%s", w, all)
		}
	}
	if strings.Contains(all, "(IPPROTO_MPTCP") || !strings.Contains(all, "IPPROTO_TCP, IPPROTO_MPTCP (") {
		t.Errorf("without DenyMPTCP, MPTCP is allowed:\n%s", all)
	}

	opts := strings.Join(mustBuild(t, Options{AllowUDP: true, DenyMPTCP: true, AllowUnixSockets: true, Kill: true}).Rules(), "\n")
	for _, w := range []string{"(IPPROTO_MPTCP", "but AF_UNIX", "SOCK_STREAM, SOCK_DGRAM (", "IPPROTO_UDP", "killed"} {
		if !strings.Contains(opts, w) {
			t.Errorf("Rules() with every option does not mention %q:\n%s", w, opts)
		}
	}
	if strings.Contains(opts, ": EPERM") {
		t.Errorf("Rules() with Kill says EPERM:\n%s", opts)
	}
}

// refusal is what the filter must return for a refused call under o.
func refusal(o Options) uint32 {
	if o.Kill {
		return retKillProcess
	}
	return retErrno | uint32(unix.EPERM)
}

func describe(r uint32) string {
	switch r & retActionMask {
	case retAllow:
		return "ALLOW"
	case retKillProcess:
		return "KILL_PROCESS"
	case retKillThread:
		return "KILL_THREAD"
	case retErrno:
		return fmt.Sprintf("ERRNO(%s)", unix.ErrnoName(unix.Errno(r&retDataMask)))
	}
	return fmt.Sprintf("%#x", r)
}

func call(nr int, args ...uint64) *seccompData {
	d := &seccompData{nr: int32(nr), arch: auditArchX86_64, ip: 0x401000}
	copy(d.args[:], args)
	return d
}

type checker struct {
	t    *testing.T
	o    Options
	prog []insn
	fail int
}

func (c *checker) expect(what string, d *seccompData, want uint32) {
	c.t.Helper()
	got, _ := run(c.t, c.prog, d)
	if got != want {
		c.fail++
		if c.fail <= 20 {
			c.t.Errorf("%+v: %s: got %s, want %s", c.o, what, describe(got), describe(want))
		}
	}
}

func (c *checker) verdict(refused bool) uint32 {
	if refused {
		return refusal(c.o)
	}
	return retAllow
}

// wantSocketRefused is the specification of the socket rules, written plainly. A
// value with any of its upper 32 bits set is refused for the family and the
// protocol (fail closed: the kernel would read only the low 32 bits); the type is
// read in its low four bits, as the kernel does (the other bits it accepts are
// SOCK_NONBLOCK and SOCK_CLOEXEC).
func wantSocketRefused(o Options, fam, typ, proto uint64) bool {
	switch fam {
	case afUnix:
		return !o.AllowUnixSockets
	case afNetlink:
		return proto != netlinkRoute
	case afInet, afInet6:
		switch typ & sockTypeMask {
		case sockStream:
			return proto != 0 && proto != ipprotoTCP && !(proto == ipprotoMPTCP && !o.DenyMPTCP)
		case sockDgram:
			return !o.AllowUDP || (proto != 0 && proto != ipprotoUDP)
		}
		return true
	}
	return true
}

const hi = 1 << 32 // a garbage upper half

func TestSocketRules(t *testing.T) {
	nativeOnly(t)
	var families, otherTypes []uint64
	for f := range uint64(64) {
		families = append(families, f)
	}
	families = append(families, 255, 0x7fffffff, 0x80000002, 0xffffffff, hi|afInet, hi|afInet6, hi|afNetlink,
		hi|afUnix, hi|unix.AF_PACKET, ^uint64(0))
	flags := []uint64{0, unix.SOCK_NONBLOCK, unix.SOCK_CLOEXEC, unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, hi, 0xfffffff0}
	var types []uint64
	for ty := range uint64(16) {
		for _, f := range flags {
			types = append(types, ty|f)
		}
	}
	otherTypes = []uint64{unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_SEQPACKET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}
	var protos []uint64
	for p := range uint64(300) {
		protos = append(protos, p)
	}
	protos = append(protos, 1000, 0xffff, 0x7fffffff, 0xffffffff, hi, hi|ipprotoTCP, hi|ipprotoMPTCP, hi|ipprotoUDP, ^uint64(0))
	otherProtos := []uint64{0, 1, 4, 6, 9, 17, 262, hi}

	for _, o := range allOptions() {
		prog := decode(t, mustBuild(t, o).BPF())
		c := &checker{t: t, o: o, prog: prog}
		for _, fam := range families {
			ts, ps := otherTypes, otherProtos
			if fam == afInet || fam == afInet6 {
				ts, ps = types, protos
			}
			for _, ty := range ts {
				for _, p := range ps {
					what := fmt.Sprintf("socket(%#x, %#x, %#x)", fam, ty, p)
					c.expect(what, call(unix.SYS_SOCKET, fam, ty, p), c.verdict(wantSocketRefused(o, fam, ty, p)))
				}
			}
		}
		for _, fam := range families {
			for _, ty := range otherTypes {
				c.expect(fmt.Sprintf("socketpair(%#x, %#x)", fam, ty), call(unix.SYS_SOCKETPAIR, fam, ty, 0, 0x1000),
					c.verdict(fam != afUnix))
			}
		}
	}
}

func TestSocketRulesNamed(t *testing.T) {
	nativeOnly(t)
	// The cases of the brief, by name, for one reading that does not need the
	// specification function.
	type tc struct {
		what            string
		fam, typ, proto uint64
		refused         func(Options) bool
	}
	always := func(Options) bool { return true }
	never := func(Options) bool { return false }
	cases := []tc{
		{"TCP", unix.AF_INET, unix.SOCK_STREAM, 0, never},
		{"TCP6 nonblocking", unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP, never},
		{"UDP", unix.AF_INET, unix.SOCK_DGRAM, 0, func(o Options) bool { return !o.AllowUDP }},
		{"UDP6 cloexec", unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, unix.IPPROTO_UDP, func(o Options) bool { return !o.AllowUDP }},
		{"ICMP ping", unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP, always},
		{"MPTCP", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP, func(o Options) bool { return o.DenyMPTCP }},
		{"MPTCP6", unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP, func(o Options) bool { return o.DenyMPTCP }},
		{"SCTP stream", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP, always},
		{"SCTP seqpacket", unix.AF_INET, unix.SOCK_SEQPACKET, unix.IPPROTO_SCTP, always},
		{"SMC", unix.AF_INET, unix.SOCK_STREAM, 256, always},
		{"raw", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP, always},
		{"raw6", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW, always},
		{"SOCK_PACKET (an AF_PACKET socket in disguise)", unix.AF_INET, unix.SOCK_PACKET, 0, always},
		{"AF_PACKET", unix.AF_PACKET, unix.SOCK_RAW, 0, always},
		{"AF_PACKET dgram", unix.AF_PACKET, unix.SOCK_DGRAM, 0, always},
		{"netlink route", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE, never},
		{"netlink route dgram", unix.AF_NETLINK, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE, never},
		{"netlink audit", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT, always},
		{"netlink sock_diag", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG, always},
		{"unix", unix.AF_UNIX, unix.SOCK_STREAM, 0, func(o Options) bool { return !o.AllowUnixSockets }},
		{"vsock", unix.AF_VSOCK, unix.SOCK_STREAM, 0, always},
		{"alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0, always},
		{"bluetooth", unix.AF_BLUETOOTH, unix.SOCK_RAW, 0, always},
		{"AF_PACKET with high bits", hi | unix.AF_PACKET, unix.SOCK_RAW, 0, always},
		{"AF_INET with high bits", hi | unix.AF_INET, unix.SOCK_STREAM, 0, always},
		{"MPTCP with high bits", unix.AF_INET, unix.SOCK_STREAM, hi | unix.IPPROTO_MPTCP, always},
	}
	for _, o := range allOptions() {
		c := &checker{t: t, o: o, prog: decode(t, mustBuild(t, o).BPF())}
		for _, k := range cases {
			c.expect(k.what, call(unix.SYS_SOCKET, k.fam, k.typ, k.proto), c.verdict(k.refused(o)))
		}
	}
}

func TestSyscallRules(t *testing.T) {
	nativeOnly(t)
	alwaysNrs := map[string]int{
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER,
		"process_vm_readv":  unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
		"pidfd_getfd": unix.SYS_PIDFD_GETFD, "keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY,
		"request_key": unix.SYS_REQUEST_KEY, "bpf": unix.SYS_BPF, "userfaultfd": unix.SYS_USERFAULTFD,
		"perf_event_open": unix.SYS_PERF_EVENT_OPEN, "mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2,
		"pivot_root": unix.SYS_PIVOT_ROOT, "unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS,
		"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT,
		"fspick": unix.SYS_FSPICK, "move_mount": unix.SYS_MOVE_MOUNT, "open_tree": unix.SYS_OPEN_TREE,
		"open_tree_attr": 467, "mount_setattr": unix.SYS_MOUNT_SETATTR, "kexec_load": unix.SYS_KEXEC_LOAD,
		"kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "init_module": unix.SYS_INIT_MODULE,
		"finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
		"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
		"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT, "acct": unix.SYS_ACCT,
		"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "quotactl": unix.SYS_QUOTACTL,
		"quotactl_fd": unix.SYS_QUOTACTL_FD, "syslog": unix.SYS_SYSLOG, "lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE,
	}
	var named []string
	for _, g := range alwaysRefused {
		named = append(named, g.names...)
	}
	for name := range alwaysNrs {
		if !slices.Contains(named, name) {
			t.Errorf("%s is not in alwaysRefused", name)
		}
	}
	allowed := map[string]*seccompData{
		"read":               call(unix.SYS_READ, 0, 0x1000, 10),
		"openat":             call(unix.SYS_OPENAT, ^uint64(99), 0x1000, 0),
		"execve":             call(unix.SYS_EXECVE, 0x1000, 0x2000, 0x3000),
		"kill":               call(unix.SYS_KILL, 1, 0),
		"landlock_restrict":  call(unix.SYS_LANDLOCK_RESTRICT_SELF, 3, 0),
		"seccomp":            call(unix.SYS_SECCOMP, 1, 0, 0x1000),
		"pidfd_open":         call(unix.SYS_PIDFD_OPEN, 1234, 0),
		"pidfd_send_signal":  call(unix.SYS_PIDFD_SEND_SIGNAL, 3, 0, 0, 0),
		"waitid P_PIDFD":     call(unix.SYS_WAITID, 3, 3, 0x1000, unix.WEXITED, 0),
		"ioctl TCGETS":       call(unix.SYS_IOCTL, 0, unix.TCGETS, 0x1000),
		"ioctl TIOCGWINSZ":   call(unix.SYS_IOCTL, 0, unix.TIOCGWINSZ, 0x1000),
		"ioctl FIONREAD":     call(unix.SYS_IOCTL, 0, 0x541b /* FIONREAD */, 0x1000),
		"personality(0)":     call(unix.SYS_PERSONALITY, 0),
		"personality(query)": call(unix.SYS_PERSONALITY, 0xffffffff),
		"syscall -1":         call(-1),
		"socket TCP":         call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0),
		"socketpair AF_UNIX": call(unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM, 0, 0x1000),
		"connect":            call(unix.SYS_CONNECT, 3, 0x1000, 16),
		"prctl NO_NEW_PRIVS": call(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1),
		"getrandom":          call(unix.SYS_GETRANDOM, 0x1000, 16, 0),
		"memfd_create":       call(unix.SYS_MEMFD_CREATE, 0x1000, 0),
		"process_madvise":    call(unix.SYS_PROCESS_MADVISE, 3, 0x1000, 1, 0, 0),
		"clone (thread)":     call(unix.SYS_CLONE, threadFlags, 0x7000, 0x1000, 0x2000, 0x3000),
		"clone (glibc fork)": call(unix.SYS_CLONE, unix.CLONE_CHILD_SETTID|unix.CLONE_CHILD_CLEARTID|uint64(unix.SIGCHLD), 0, 0, 0x1000, 0),
		"clone (Go fork)":    call(unix.SYS_CLONE, unix.CLONE_VFORK|unix.CLONE_VM|unix.CLONE_PIDFD|uint64(unix.SIGCHLD), 0, 0x1000, 0, 0),
		"clone (vfork SIGCHLD with every non-namespace flag)": call(unix.SYS_CLONE, nonNamespaceFlags|uint64(unix.SIGCHLD)),
	}
	allowed["ptrace(PTRACE_TRACEME)"] = call(unix.SYS_PTRACE, unix.PTRACE_TRACEME)
	allowed["ptrace(PTRACE_DETACH)"] = call(unix.SYS_PTRACE, unix.PTRACE_DETACH, 1234)
	for _, o := range allOptions() {
		c := &checker{t: t, o: o, prog: decode(t, mustBuild(t, o).BPF())}
		for _, req := range []uint64{unix.PTRACE_ATTACH, unix.PTRACE_SEIZE, unix.PTRACE_PEEKDATA, unix.PTRACE_POKEDATA, 1 << 32} {
			c.expect(fmt.Sprintf("ptrace(%#x)", req), call(unix.SYS_PTRACE, req, 1), refusal(o))
		}
		for name, nr := range alwaysNrs {
			c.expect(name, call(nr), refusal(o))
			c.expect(name+" with arguments", call(nr, 1, 2, 3, 4, 5, 6), refusal(o))
		}
		for name, d := range allowed {
			c.expect(name, d, retAllow)
		}
		// clone3 fails with ENOSYS, even with Kill: callers fall back to clone.
		c.expect("clone3", call(unix.SYS_CLONE3, 0x1000, 88), retErrno|uint32(unix.ENOSYS))
		for _, ns := range namespaceFlags {
			for _, base := range []uint64{0, uint64(unix.SIGCHLD), threadFlags, unix.CLONE_VFORK | unix.CLONE_VM | unix.CLONE_PIDFD | uint64(unix.SIGCHLD), hi} {
				c.expect(fmt.Sprintf("clone(%s|%#x)", ns.name, base), call(unix.SYS_CLONE, base|ns.flag), refusal(o))
			}
		}
		for _, req := range []uint64{unix.TIOCSTI, 0x541c, hi | unix.TIOCSTI, 0xffffffff00000000 | 0x541c} {
			c.expect(fmt.Sprintf("ioctl(0, %#x)", req), call(unix.SYS_IOCTL, 0, req, 0x1000), refusal(o))
		}
		refusedPersonas := []uint64{1, 8, 0x0020000, 0x0040000, 0x0400000, 0x0100000, 0x0800000, 0x8000000,
			0x7fffffff, 0x80000000, 0xfffffffe, hi, hi | 0xffffffff, ^uint64(0)}
		for bit := range 32 {
			if p := uint64(1) << bit; !slices.Contains(refusedPersonas, p) {
				refusedPersonas = append(refusedPersonas, p)
			}
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			refusedPersonas = append(refusedPersonas, 1+r.Uint64N(0xfffffffe))
		}
		for _, p := range refusedPersonas {
			c.expect(fmt.Sprintf("personality(%#x)", p), call(unix.SYS_PERSONALITY, p), refusal(o))
		}
	}
}

// threadFlags are glibc's pthread_create flags.
const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
	unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID

// nonNamespaceFlags is every clone flag above CSIGNAL that creates no namespace.
const nonNamespaceFlags = 0xffffff00 &^ (unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET)

func TestForeignArchitecturesKilled(t *testing.T) {
	nativeOnly(t)
	for _, o := range allOptions() {
		c := &checker{t: t, o: o, prog: decode(t, mustBuild(t, o).BPF())}
		for _, nr := range []int{0, 1, 20, 39, 102, 120, 359, 435} {
			// i386 (int 0x80, sysenter): socketcall is 102, socket 359, clone 120.
			d := call(nr, unix.AF_PACKET, unix.SOCK_RAW, 0)
			d.arch = auditArchI386
			c.expect(fmt.Sprintf("i386 system call %d", nr), d, retKillProcess)
			// x32: the x86_64 arch with the x32 bit in the number.
			c.expect(fmt.Sprintf("x32 system call %d", nr), call(nr|x32SyscallBit, unix.AF_PACKET, unix.SOCK_RAW, 0), retKillProcess)
		}
		for _, arch := range []uint32{0, 0xc00000b7 /* aarch64 */, 0x4000003e /* x86_64 without 64-bit flag */} {
			d := call(unix.SYS_READ)
			d.arch = arch
			c.expect(fmt.Sprintf("arch %#x", arch), d, retKillProcess)
		}
	}
}

// TestCost bounds the instructions a common system call runs through.
func TestCost(t *testing.T) {
	nativeOnly(t)
	prog := decode(t, mustBuild(t, Options{}).BPF())
	for _, d := range []*seccompData{call(unix.SYS_READ, 0), call(unix.SYS_WRITE, 1), call(unix.SYS_FUTEX),
		call(unix.SYS_MMAP), call(unix.SYS_OPENAT), call(unix.SYS_CLOSE), call(unix.SYS_EPOLL_WAIT)} {
		ret, steps := run(t, prog, d)
		t.Logf("system call %d: %s after %d instructions", d.nr, describe(ret), steps)
		if steps > 24 {
			t.Errorf("system call %d runs %d instructions", d.nr, steps)
		}
	}
	// The argument checks cost more, on rarer system calls.
	for _, d := range []*seccompData{call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0),
		call(unix.SYS_CLONE, threadFlags), call(unix.SYS_IOCTL, 0, unix.TCGETS), call(unix.SYS_PERSONALITY, 0xffffffff)} {
		ret, steps := run(t, prog, d)
		t.Logf("system call %d: %s after %d instructions", d.nr, describe(ret), steps)
		if steps > 200 {
			t.Errorf("system call %d runs %d instructions", d.nr, steps)
		}
	}
}

func TestSpan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		lo := r.Uint64N(1 << 12)
		hi := lo + r.Uint64N(1<<12)
		cmps := span(0, lo, hi, ^uint64(0))
		for v := uint64(0); v < 1<<13+5; v++ {
			in := v >= lo && v <= hi
			matched := 0
			for _, c := range cmps {
				if (c.op == opEq && v == c.val) || (c.op == opMaskedEq && v&c.mask == c.val) {
					matched++
				}
			}
			if (matched > 0) != in || matched > 1 {
				t.Fatalf("span(%d, %d): %d matches %d blocks", lo, hi, v, matched)
			}
		}
	}
	if got := len(span(0, 1, 0xfffffffe, ^uint64(0))); got != 62 {
		t.Errorf("span(1, 0xfffffffe) has %d blocks, want 62", got)
	}
	if got := span(0, 0, ^uint64(0), ^uint64(0)); len(got) != 2 || got[0].mask != 1<<63 || got[1].val != 1<<63 {
		t.Errorf("span over every value: %+v", got)
	}
}
