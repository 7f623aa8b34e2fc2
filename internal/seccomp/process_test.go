//go:build linux && cgo

package seccomp

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"golang.org/x/sys/unix"
)

// These tests run real programs under the filter, installed by the supervisor's
// seccomp stage exactly as a provider does: the test binary is the supervisor (the
// supervise package's C constructor takes over when it is re-executed with its
// marker).

//go:embed checks.py
var checksPy string

// python is the real interpreter: a python3 found on PATH may be a slow shim.
const python = "/usr/bin/python3"

// goChildEnv makes the test binary run goChild instead of the tests.
const goChildEnv = "PYSANDBOXES_SECCOMP_TEST_GO_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(goChildEnv) == "1" {
		os.Exit(goChild())
	}
	os.Exit(m.Run())
}

// supervised runs path under the supervisor, with the filter bpf installed (none
// when bpf is nil), and returns its output and wait status.
func supervised(t *testing.T, bpf []byte, env []string, path string, args ...string) (string, syscall.WaitStatus) {
	t.Helper()
	spec := supervise.Spec{Path: path, Args: append([]string{path}, args...)}
	if bpf != nil {
		spec.Stages = []supervise.Stage{{Kind: supervise.StageSeccomp, BPF: bpf}}
	}
	if env == nil {
		env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	}
	cmd, h, err := supervise.Command(spec, "", env, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := h.Start(ctx, cmd); err != nil {
		cmd.Wait()
		t.Fatalf("start %s: %v (stderr %q)", path, err, stderr.String())
	}
	cmd.Wait() // the supervisor's exit code mirrors the program's: read its report
	ws, err := h.Status()
	if err != nil {
		t.Fatalf("%s: %v (stderr %q)", path, err, stderr.String())
	}
	if s := stderr.String(); s != "" {
		t.Logf("%s: stderr: %s", path, s)
	}
	return out.String(), ws
}

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s: %v (apt-get install python3)", python, err)
	}
}

// runChecks runs checks.py (every check when names is empty) and returns each
// check's result.
func runChecks(t *testing.T, bpf []byte, names ...string) (map[string]string, syscall.WaitStatus) {
	t.Helper()
	out, ws := supervised(t, bpf, nil, python, append([]string{"-S", "-c", checksPy}, names...)...)
	res := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, result, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("checks.py printed %q", sc.Text())
		}
		res[name] = result
	}
	return res, ws
}

// The checks of checks.py, by expected effect of the filter.
var (
	// refused whatever the Options
	refusedChecks = []string{"icmp_ping", "sctp", "smc", "raw", "raw6", "inet_sock_packet", "packet",
		"packet_dgram", "vsock", "alg", "netlink_audit", "netlink_sock_diag", "hibits_packet", "hibits_inet_udp",
		"hibits_mptcp", "socketpair_inet", "io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace",
		"process_vm_readv", "process_vm_writev", "pidfd_getfd", "keyctl", "add_key", "request_key", "bpf",
		"userfaultfd", "perf_event_open", "mount", "umount2", "pivot_root", "unshare", "unshare_files", "setns",
		"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr", "mount_setattr",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "open_by_handle_at",
		"name_to_handle_at", "swapon", "swapoff", "reboot", "acct", "iopl", "ioperm", "quotactl", "quotactl_fd",
		"syslog", "lookup_dcookie", "personality_no_aslr", "personality_rie", "personality_linux32", "tiocsti",
		"tiocsti_hibits", "tioclinux", "clone_newns", "clone_newcgroup", "clone_newuts", "clone_newipc",
		"clone_newuser", "clone_newpid", "clone_newnet", "clone_newtime"}
	// allowed whatever the Options: the filter must not change their result
	allowedChecks = []string{"tcp", "tcp6", "tcp_proto", "netlink_route", "netlink_route_dgram", "socketpair",
		"socketpair_raw", "getaddrinfo", "personality_query", "personality_linux", "tcgets", "clone_plain_invalid",
		"thread", "fork", "posix_spawn", "subprocess", "sh"}
	// must succeed, with and without the filter
	mustWork = []string{"tcp", "tcp6", "tcp_proto", "netlink_route", "socketpair", "socketpair_raw",
		"getaddrinfo", "personality_query", "personality_linux", "tcgets", "thread", "fork", "posix_spawn",
		"subprocess", "sh"}
	udpChecks   = []string{"udp", "udp6", "udp_flags", "udp_proto"}
	mptcpChecks = []string{"mptcp", "mptcp6"}
	unixChecks  = []string{"unix", "unix_dgram"}
	stateChecks = []string{"clone3", "seccomp_mode", "no_new_privs", "supervisor_threads"}
)

// refusedUnder lists the checks refused under o.
func refusedUnder(o Options) []string {
	out := slices.Clone(refusedChecks)
	if !o.AllowUDP {
		out = append(out, udpChecks...)
	}
	if o.DenyMPTCP {
		out = append(out, mptcpChecks...)
	}
	if !o.AllowUnixSockets {
		out = append(out, unixChecks...)
	}
	return out
}

// TestProgramsUnderFilter runs every check without a filter, then under filters of
// several Options: each refusal must give EPERM (clone3 ENOSYS), and everything
// else the same result as without the filter. A check that gives EPERM even
// without the filter proves nothing with EPERM: it is run again with Kill, where
// the filter must kill the process.
func TestProgramsUnderFilter(t *testing.T) {
	needPython(t)
	base, ws := runChecks(t, nil)
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("checks.py without a filter: %v", ws)
	}
	known := slices.Concat(refusedChecks, allowedChecks, udpChecks, mptcpChecks, unixChecks, stateChecks)
	for name := range base {
		if !slices.Contains(known, name) {
			t.Errorf("check %s of checks.py has no expectation here", name)
		}
	}
	for _, name := range known {
		if _, ok := base[name]; !ok {
			t.Errorf("checks.py has no check %s", name)
		}
	}
	for _, name := range mustWork {
		if base[name] != "ok" {
			t.Errorf("without a filter, %s: %s, want ok", name, base[name])
		}
	}
	if base["seccomp_mode"] != "0" || !strings.HasPrefix(base["supervisor_threads"], "0/") {
		t.Fatalf("without a filter: Seccomp %s, supervisor threads %s", base["seccomp_mode"], base["supervisor_threads"])
	}
	t.Logf("without a filter: %v", base)

	inconclusive := map[string]bool{}
	for _, o := range []Options{{}, {AllowUDP: true, DenyMPTCP: true, AllowUnixSockets: true}, {DenyMPTCP: true}} {
		p := mustBuild(t, o)
		got, ws := runChecks(t, p.BPF())
		if !ws.Exited() || ws.ExitStatus() != 0 {
			t.Fatalf("%+v: checks.py: %v", o, ws)
		}
		refused := refusedUnder(o)
		for _, name := range known {
			var want string
			switch {
			case slices.Contains(refused, name):
				want = "EPERM"
				if base[name] == "EPERM" {
					inconclusive[name] = true
				}
			case name == "clone3":
				want = "ENOSYS"
			case name == "seccomp_mode":
				want = "2"
			case name == "no_new_privs":
				want = "1"
			case name == "supervisor_threads":
				// The filter confines the program, never the supervisor: in a cgo
				// build the supervisor is the C one (internal/supervise), a single
				// thread that starts the program from a process of its own.
				want = "0/1"
			default:
				want = base[name]
			}
			if got[name] != want {
				t.Errorf("%+v: %s: %s, want %s (without the filter: %s)", o, name, got[name], want, base[name])
			}
		}
	}

	// With Kill, the refusals kill: one process per inconclusive check, and a few
	// others; what is allowed still works; clone3 still fails with ENOSYS.
	kill := mustBuild(t, Options{Kill: true, DenyMPTCP: true}).BPF()
	var names []string
	for name := range inconclusive {
		names = append(names, name)
	}
	slices.Sort(names)
	t.Logf("EPERM even without a filter (checked with Kill): %v", names)
	for _, name := range append(names, "ptrace", "udp", "mptcp", "packet", "unix", "clone_newuser", "tiocsti", "io_uring_setup") {
		got, ws := runChecks(t, kill, "seccomp_mode", name)
		if got["seccomp_mode"] != "2" || !ws.Signaled() || ws.Signal() != unix.SIGSYS || got[name] != "" {
			t.Errorf("Kill: %s: %v, status %v; want killed by SIGSYS", name, got, ws)
		}
	}
	// glibc tries the nscd socket (AF_UNIX) in name lookups: with Kill, that kills
	// unless AllowUnixSockets.
	got, ws := runChecks(t, kill, "getaddrinfo")
	if !ws.Signaled() || ws.Signal() != unix.SIGSYS {
		t.Errorf("Kill: getaddrinfo without AllowUnixSockets: %v, %v; want killed by SIGSYS", got, ws)
	}
	killUnix := mustBuild(t, Options{Kill: true, DenyMPTCP: true, AllowUnixSockets: true}).BPF()
	got, ws = runChecks(t, killUnix, append(slices.Clone(mustWork), "clone3")...)
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("Kill: allowed checks: %v", ws)
	}
	for _, name := range mustWork {
		if got[name] != "ok" {
			t.Errorf("Kill: %s: %s, want ok", name, got[name])
		}
	}
	if got["clone3"] != "ENOSYS" {
		t.Errorf("Kill: clone3: %s, want ENOSYS", got["clone3"])
	}
}

// goChild is a Go program run under the filter: it starts programs, creates
// threads and network sockets the way Go does.
func goChild() int {
	say := func(name string, err error) {
		res := "ok"
		var errno syscall.Errno
		switch {
		case errors.As(err, &errno):
			res = unix.ErrnoName(errno)
		case err != nil:
			res = strings.ReplaceAll(err.Error(), " ", "_")
		}
		fmt.Printf("%s %s\n", name, res)
	}
	say("exec", exec.Command("/bin/true").Run())
	out, err := exec.Command("/bin/sh", "-c", "/bin/echo hello | /bin/cat").Output()
	if err == nil && string(out) != "hello\n" {
		err = fmt.Errorf("output %q", out)
	}
	say("exec_sh", err)
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err == nil {
		var st *os.ProcessState
		st, err = p.Wait()
		if err == nil && !st.Success() {
			err = errors.New(st.String())
		}
	}
	say("start_process", err)

	// New OS threads: goroutines locked to threads, started together.
	var wg sync.WaitGroup
	tids := make(chan int, 8)
	for range 8 {
		wg.Go(func() {
			runtime.LockOSThread()
			tids <- unix.Gettid()
			time.Sleep(20 * time.Millisecond)
		})
	}
	wg.Wait()
	close(tids)
	seen := map[int]bool{}
	for tid := range tids {
		seen[tid] = true
	}
	err = nil
	if len(seen) != 8 {
		err = fmt.Errorf("%d threads", len(seen))
	}
	say("threads", err)

	// net.Listen tries MPTCP first and falls back to TCP when it is refused.
	err = func() error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Write([]byte("hi"))
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 2)
		if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
			return fmt.Errorf("read %q: %v", buf, err)
		}
		return nil
	}()
	say("listen_dial", err)
	for _, s := range []struct {
		name            string
		fam, typ, proto int
	}{
		{"mptcp", unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP},
		{"udp", unix.AF_INET, unix.SOCK_DGRAM, 0},
		{"tcp", unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0},
	} {
		fd, err := unix.Socket(s.fam, s.typ, s.proto)
		if err == nil {
			unix.Close(fd)
		}
		say(s.name, err)
	}
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "Seccomp:" {
			fmt.Printf("seccomp_mode %s\n", f[1])
		}
	}
	return 0
}

// TestGoProgramUnderFilter: a Go program under the filter Landlock needs starts
// other programs (clone with CLONE_VFORK, CLONE_VM and CLONE_PIDFD, pidfd system
// calls), starts threads, listens and dials (MPTCP refused, TCP used instead).
func TestGoProgramUnderFilter(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, ws := supervised(t, mustBuild(t, Options{DenyMPTCP: true}).BPF(), []string{goChildEnv + "=1", "PATH=/usr/bin:/bin"}, self)
	t.Logf("status %v, output:\n%s", ws, out)
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("Go program under the filter: %v", ws)
	}
	for _, want := range []string{"exec ok", "exec_sh ok", "start_process ok", "threads ok", "listen_dial ok",
		"mptcp EPERM", "udp EPERM", "tcp ok", "seccomp_mode 2"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q", want)
		}
	}
}

// elf returns a minimal static x86_64 executable made of code (loaded at
// 0x400000, entry right after the headers).
func elf(code []byte) []byte {
	const base, hdr = 0x400000, 64 + 56
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	binary.Write(&b, le, struct {
		Type, Machine                                      uint16
		Version                                            uint32
		Entry, Phoff, Shoff                                uint64
		Flags                                              uint32
		Ehsize, Phentsize, Phnum, Shentsize, Shnum, Shstrn uint16
	}{2, 0x3e, 1, base + hdr, 64, 0, 0, 64, 56, 1, 0, 0, 0})
	size := uint64(hdr + len(code))
	binary.Write(&b, le, struct {
		Type, Flags                                uint32
		Offset, Vaddr, Paddr, Filesz, Memsz, Align uint64
	}{1, 5, 0, base, base, size, size, 0x1000})
	b.Write(code)
	return b.Bytes()
}

// exitWithSign ends a test program: exit_group(eax < 0 ? 1 : 0) through the
// native system call instruction.
var exitWithSign = []byte{
	0x89, 0xc7, // mov edi, eax
	0xc1, 0xef, 0x1f, // shr edi, 31
	0xb8, 0xe7, 0x00, 0x00, 0x00, // mov eax, 231 (exit_group)
	0x0f, 0x05, // syscall
}

// TestForeignABIRefused runs system calls of the i386 ABI (int 0x80) and of the
// x32 ABI from tiny hand-made x86_64 programs: without the filter they run (or
// fail with ENOSYS where the kernel lacks the ABI); under it the process is killed.
func TestForeignABIRefused(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("x86 ABIs only (this is %s)", runtime.GOARCH)
	}
	dir := t.TempDir()
	progs := map[string][]byte{
		// mov eax, 20 (i386 getpid); int 0x80
		"i386": append([]byte{0xb8, 0x14, 0x00, 0x00, 0x00, 0xcd, 0x80}, exitWithSign...),
		// mov eax, 0x40000027 (x32 getpid); syscall
		"x32": append([]byte{0xb8, 0x27, 0x00, 0x00, 0x40, 0x0f, 0x05}, exitWithSign...),
		// mov eax, 39 (getpid); syscall: the control
		"native": append([]byte{0xb8, 0x27, 0x00, 0x00, 0x00, 0x0f, 0x05}, exitWithSign...),
	}
	bpf := mustBuild(t, Options{}).BPF()
	for _, name := range []string{"native", "i386", "x32"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, elf(progs[name]), 0o755); err != nil {
				t.Fatal(err)
			}
			_, before := supervised(t, nil, nil, path)
			_, under := supervised(t, bpf, nil, path)
			t.Logf("without the filter %v, under it %v", before, under)
			switch {
			case name == "native":
				if !before.Exited() || before.ExitStatus() != 0 || !under.Exited() || under.ExitStatus() != 0 {
					t.Fatalf("the native program: %v without the filter, %v under it: want exit 0 twice", before, under)
				}
				return
			case name == "i386" && before.Signaled() && before.Signal() == unix.SIGSEGV:
				// The filter's verdict on i386 is checked in TestForeignArchitecturesKilled.
				t.Skipf("this kernel runs no i386 system call (IA-32 emulation off): int 0x80 faults (%v) before seccomp sees it", before)
			case !before.Exited():
				t.Errorf("without the filter: %v, want an exit (0, or 1 for ENOSYS)", before)
			}
			if !under.Signaled() || under.Signal() != unix.SIGSYS {
				t.Errorf("under the filter: %v, want killed by SIGSYS", under)
			}
		})
	}
}
