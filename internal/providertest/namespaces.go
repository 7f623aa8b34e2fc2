package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
	"github.com/pysandboxes/pysandboxes/policy"
)

// The scenarios below are the tests that the launcher-based namespace providers
// (bwrap, firejail) share but for a few outcomes of their own, which the caller
// gives: each provider's test of the same name calls one.

// ReadWriteExposedTree: writes in an expose-rw directory land on the host; a
// read-write directory inside a read-only one is writable, a read-only one
// inside a read-write one is not (the deepest rule wins); writing anywhere else
// fails and leaves the host untouched. The directory above the exposed ones is
// read-only; rootList is the outcome of listing it ("EACCES": crossed but not
// listed).
func ReadWriteExposedTree(t *testing.T, name, rootList string) {
	root := t.TempDir()
	rw := filepath.Join(root, "rw")
	roInRW := filepath.Join(rw, "frozen")
	ro := filepath.Join(root, "ro")
	rwInRO := filepath.Join(ro, "scratch")
	for _, d := range []string{roInRW, rwInRO} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	WriteFile(t, filepath.Join(roInRW, "keep.txt"), "keep")
	sb := Sandbox(t, name, []string{"expose-rw=" + rw, "expose-ro=" + roInRW, "expose-ro=" + ro, "expose-rw=" + rwInRO})
	out := Py(t, sb, TryPrelude+`
rw, roInRW, ro, rwInRO, root = sys.argv[1:6]
attempt("rw-create", lambda: open(rw + "/new.txt", "w").write("new"))
attempt("rw-mkdir", lambda: os.mkdir(rw + "/d"))
attempt("rw-in-ro", lambda: open(rwInRO + "/x.txt", "w").write("x"))
attempt("ro-in-rw", lambda: open(roInRW + "/keep.txt", "w").write("PWNED"))
attempt("ro-create", lambda: open(ro + "/y.txt", "w").write("y"))
attempt("root-create", lambda: open(root + "/z.txt", "w").write("z"))
attempt("root-list", lambda: sorted(os.listdir(root)))
attempt("slash-create", lambda: open("/z.txt", "w").write("z"))
attempt("usr-create", lambda: open("/usr/z.txt", "w").write("z"))
`, rw, roInRW, ro, rwInRO, root)
	ExpectLine(t, out, "rw-create OK 3")
	ExpectLine(t, out, "rw-mkdir OK None")
	ExpectLine(t, out, "rw-in-ro OK 1")
	ExpectLine(t, out, "ro-in-rw EROFS")
	ExpectLine(t, out, "ro-create EROFS")
	ExpectLine(t, out, "root-create EROFS") // the way to the exposed directories: read-only
	ExpectLine(t, out, "root-list "+rootList)
	ExpectLine(t, out, "slash-create EROFS")
	ExpectLine(t, out, "usr-create EROFS")
	if b, err := os.ReadFile(filepath.Join(rw, "new.txt")); err != nil || string(b) != "new" {
		t.Errorf("the write did not land on the host: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(roInRW, "keep.txt")); string(b) != "keep" {
		t.Errorf("a read-only file changed: %q", b)
	}
	for _, p := range []string{filepath.Join(ro, "y.txt"), filepath.Join(root, "z.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created on the host", p)
		}
	}
}

// TmpIsNotImplicit: without a rule the program cannot write in /tmp (tmpErr is
// the errno of a write there, and tempfile fails with ENOENT: no implicit write
// anywhere); the rule privateTmp gives a private, empty one.
func TmpIsNotImplicit(t *testing.T, name, tmpErr, privateTmp string) {
	tmpName := "pysb-tmp-" + filepath.Base(t.TempDir())
	out := Py(t, Sandbox(t, name, nil), TryPrelude+`
attempt("tmp", lambda: open("/tmp/" + sys.argv[1], "w").write("x"))
import tempfile
attempt("tempfile", lambda: tempfile.TemporaryFile())
`, tmpName)
	ExpectLine(t, out, "tmp "+tmpErr)
	ExpectLine(t, out, "tempfile ENOENT")
	out = Py(t, Sandbox(t, name, []string{privateTmp}), TryPrelude+`
attempt("write", lambda: open("/tmp/" + sys.argv[1], "w").write("x"))
attempt("list", lambda: sorted(os.listdir("/tmp")) == [sys.argv[1]])
`, tmpName)
	ExpectLine(t, out, "write OK 1")
	ExpectLine(t, out, "list OK True")
	if _, err := os.Lstat("/tmp/" + tmpName); err == nil {
		t.Error("the private /tmp is the host's")
	}
}

// SeccompInEffect: the program runs under the seccomp filter (Seccomp: 2), with
// no_new_privs and no capability; mount, unshare, ptrace, keyctl, bpf and
// io_uring are refused (EPERM), so are raw sockets; TCP and Unix sockets can be
// made. want holds the outcomes of the provider's own: "udp" (making a UDP
// socket), "udp-out" (a datagram to 10.1.2.3:53) and "packet" (a packet socket).
func SeccompInEffect(t *testing.T, name string, want map[string]string) {
	sb := Sandbox(t, name, nil)
	out := Py(t, sb, TryPrelude+`
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
def udp_out():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", ("10.1.2.3", 53))
    finally:
        s.close()
attempt("udp-out", udp_out)
`)
	ExpectLine(t, out, "seccomp 2")
	ExpectLine(t, out, "nnp 1")
	ExpectLine(t, out, "capeff 0000000000000000")
	ExpectLine(t, out, "capbnd 0000000000000000")
	for _, l := range []string{"mount", "unshare", "ptrace", "keyctl", "bpf", "io_uring", "raw"} {
		ExpectLine(t, out, l+" EPERM")
	}
	ExpectLine(t, out, "tcp OK None")
	ExpectLine(t, out, "unix OK None")
	for _, l := range []string{"udp", "udp-out", "packet"} {
		ExpectLine(t, out, l+" "+want[l])
	}
}

// NetTCPByHostAndPort: with net= rules, TCP leaves only to the allowed address
// and port (the filter answers anything else with a reset: ECONNREFUSED), a DENY
// rule wins over a wider ALLOW, and UDP is refused (EPERM) without a UDP rule;
// the server of the test network n sees only the allowed connection.
func NetTCPByHostAndPort(t *testing.T, name string, n *Net) {
	sb := Sandbox(t, name, []string{
		"net=ALLOW|tcp|" + n.Addr(2) + "|" + strconv.Itoa(TCPA) + "," + strconv.Itoa(TCPB) + "|OUT",
		"net=DENY|tcp|" + n.Addr(2) + "|" + strconv.Itoa(TCPB) + "|OUT",
	})
	out := Py(t, sb, NetPrelude+`
a, b, port_a, port_b, port_c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
attempt("allowed", lambda: tcp(a, port_a))
attempt("denied-port", lambda: tcp(a, port_b))
attempt("default-port", lambda: tcp(a, port_c))
attempt("other-host", lambda: tcp(b, port_a))
attempt("udp", lambda: udp(a, 5301))
attempt("ipv6", lambda: socket.create_connection(("2001:db8::1", 80), timeout=5))
`, n.Addr(2), n.Addr(3), strconv.Itoa(TCPA), strconv.Itoa(TCPB), strconv.Itoa(TCPC))
	ExpectLine(t, out, "allowed OK hello")
	for _, l := range []string{"denied-port", "default-port", "other-host"} {
		ExpectLine(t, out, l+" ECONNREFUSED")
	}
	ExpectLine(t, out, "udp EPERM")
	ExpectLine(t, out, "ipv6 ENETUNREACH")
	if !n.Saw(false, fmt.Sprintf("%s:%d", n.Addr(2), TCPA)) {
		t.Error("the server did not see the allowed connection")
	}
	for _, l := range []string{fmt.Sprintf("%s:%d", n.Addr(2), TCPB), fmt.Sprintf("%s:%d", n.Addr(2), TCPC), fmt.Sprintf("%s:%d", n.Addr(3), TCPA)} {
		if n.Saw(false, l) {
			t.Errorf("the server saw a refused connection to %s", l)
		}
	}
}

// NetUDPByPort: a UDP rule lets datagrams out to its port only (the filter
// drops the others: send fails with EPERM), and the replies come back.
func NetUDPByPort(t *testing.T, name string, n *Net) {
	sb := Sandbox(t, name, []string{"net=ALLOW|udp|" + n.Addr(2) + "|" + strconv.Itoa(UDPA) + "|OUT"})
	out := Py(t, sb, NetPrelude+`
a, pa, pb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
attempt("allowed", lambda: udp(a, pa))
attempt("denied", lambda: udp(a, pb))
attempt("tcp", lambda: tcp(a, 8001))
`, n.Addr(2), strconv.Itoa(UDPA), strconv.Itoa(UDPB))
	ExpectLine(t, out, "allowed OK echo:ping")
	ExpectLine(t, out, "denied EPERM")
	ExpectLine(t, out, "tcp ECONNREFUSED")
	if n.Saw(true, fmt.Sprintf("%s:%d", n.Addr(2), UDPB)) {
		t.Error("the server received a refused datagram")
	}
}

// HostListener listens on a port of the host's 127.0.0.1, answering "host" to
// every connection, until the test ends; it returns the port.
func HostListener(t *testing.T) string {
	return strconv.Itoa(Serve(t, "tcp4", "127.0.0.1:0", "host\n").Addr().(*net.TCPAddr).Port)
}

// NetHostLoopbackAndNames: an OUT rule for the host's 127.0.0.1 reaches a
// listener of the host on that port only (any other port of 127.0.0.1 is the
// sandbox's own loopback); the sandbox's /etc/hosts holds the pinned names
// (localhost here) and its /etc/resolv.conf names the filter's resolver (on its
// second line when resolvSecond is set). The caller has made the test network
// (which skips the test without the filter).
func NetHostLoopbackAndNames(t *testing.T, name string, resolvSecond bool) {
	port := HostListener(t)
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sb := Sandbox(t, name, []string{"net=ALLOW|tcp|localhost|" + port + "|OUT"})
	out := Py(t, sb, NetPrelude+`
attempt("host", lambda: tcp("localhost", int(sys.argv[1])))
attempt("other", lambda: tcp("127.0.0.1", int(sys.argv[2])))
attempt("resolv", lambda: open("/etc/resolv.conf").read())
attempt("resolv-second", lambda: open("/etc/resolv.conf").read().split("\n")[1])
print("hosts", [l for l in open("/etc/hosts").read().splitlines() if l.startswith("127.0.0.1")])
`, port, strconv.Itoa(other.Addr().(*net.TCPAddr).Port))
	ExpectLine(t, out, "host OK host")
	ExpectLine(t, out, "other ECONNREFUSED")
	if !strings.Contains(out, "resolv OK ") || !strings.Contains(out, "nameserver 10.0.2.3") {
		t.Errorf("resolv.conf:\n%s", out)
	}
	if resolvSecond {
		ExpectLine(t, out, "resolv-second OK nameserver 10.0.2.3")
	}
	if !strings.Contains(out, "127.0.0.1\\tlocalhost") {
		t.Errorf("hosts file:\n%s", out)
	}
}

// NetNoLeaks: runs with the filter of the test network n leave no slirp4netns,
// descriptor or child behind.
func NetNoLeaks(t *testing.T, name string, n *Net) {
	sb := Sandbox(t, name, []string{"net=ALLOW|tcp|" + n.Addr(2) + "|" + strconv.Itoa(TCPA) + "|OUT"})
	ctx := context.Background()
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	before, _ := proctest.OpenFDs()
	slirpBefore := len(Slirps())
	for i := 0; i < 10; i++ {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(Slirps()) > slirpBefore && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s := Slirps(); len(s) > slirpBefore {
		t.Errorf("slirp4netns left: %v", s)
	}
	if after, _ := proctest.OpenFDs(); after != before {
		t.Errorf("descriptors: %d before, %d after", before, after)
	}
}

// BenchTrue runs /bin/true confined by the provider name.
func BenchTrue(b *testing.B, name string) { BenchTrueIn(b, Sandbox(b, name, nil)) }

// BenchTrueIn runs /bin/true in the sandbox sb.
func BenchTrueIn(b *testing.B, sb *pysandboxes.Sandbox) {
	ctx := context.Background()
	for b.Loop() {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchPython runs python3 -S -c pass confined by the provider name.
func BenchPython(b *testing.B, name string) {
	sb := Sandbox(b, name, nil)
	ctx := context.Background()
	py := Python(b)
	for b.Loop() {
		if err := sb.Command(ctx, py, "-S", "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchBareTrue is the reference: a bare exec of /bin/true.
func BenchBareTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// EnvironmentExact: the program sees exactly the policy's variables (values with
// spaces, '=', newlines and non-ASCII kept), not the host's (a secret set in the
// host's environment never reaches it), and none that the launcher or the
// provider would add (PWD, container...).
func EnvironmentExact(t *testing.T, name string) {
	t.Setenv("HOST_SECRET", "s3cr3t-do-not-leak")
	rules := []string{"env=A=1", "env=SPACES=a b  c", "env=EQ=x=y=z", "env=NL=line1\\nline2", "env=UTF=été"}
	out := Py(t, Sandbox(t, name, rules), "import os, json; print(json.dumps(dict(os.environ)))")
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{}
	for _, kv := range Build(t, rules...).Environ() {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Error("the host's secret leaked")
	}
}

// EnvironmentNotOnCommandLine: the values of the environment never appear on a
// host process's command line.
func EnvironmentNotOnCommandLine(t *testing.T, name string) {
	sb := Sandbox(t, name, []string{"env=TOKEN=tok-0123456789-secret"})
	cmd := sb.Command(context.Background(), "/bin/sh", "-c", "read x")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "tok-0123456789-secret") {
			t.Fatalf("process %s shows the value on its command line: %q", e.Name(), b)
		}
	}
}

// EnvironmentFromRequest: Sandbox.Python's own variables (the Python layer's)
// reach the program too: the request's environment is what counts.
func EnvironmentFromRequest(t *testing.T, name string) {
	sb := Sandbox(t, name, []string{"env=A=1", "python-import=os"}, pysandboxes.WithPython("/usr/bin/python3"))
	out, err := sb.Python(context.Background(), "-c", "import os; print(os.environ.get('A'))").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ExpectLine(t, string(out), "1")
}

// LoopbackOnlyWithoutNetRules: without a net= rule the sandbox has its own
// network namespace with only the loopback interface: a listener of the host on
// 127.0.0.1 is unreachable (ECONNREFUSED: another loopback), any other address
// unroutable (ENETUNREACH); listening is refused without an IN rule (Landlock's
// TCP bind rules: EACCES), and abstract Unix sockets of the host are out of
// reach.
func LoopbackOnlyWithoutNetRules(t *testing.T, name string) {
	port := HostListener(t)
	abstractName := name + "-test-" + port
	abstract, err := net.Listen("unix", "@"+abstractName)
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	out := Py(t, Sandbox(t, name, nil), TryPrelude+`
port = int(sys.argv[1])
print("ifaces", [n for _, n in socket.if_nameindex()])
def connect(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr)
    finally:
        s.close()
attempt("host-listener", lambda: connect(("127.0.0.1", port)))
attempt("elsewhere", lambda: connect(("10.1.2.3", 80)))
def self_talk():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname()); c.close(); srv.close()
attempt("self", self_talk)
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(b"\0" + sys.argv[2].encode())
    finally:
        s.close()
attempt("abstract", abstract)
`, port, abstractName)
	ExpectLine(t, out, "ifaces ['lo']")
	ExpectLine(t, out, "host-listener ECONNREFUSED")
	ExpectLine(t, out, "elsewhere ENETUNREACH")
	ExpectLine(t, out, "self EACCES")
	ExpectLine(t, out, "abstract ECONNREFUSED")
}

// NetRuleRefused: a net= ALLOW rule the network filter cannot serve (an IPv6
// destination: its egress network is IPv4 only; a loopback address other than
// 127.0.0.1; without the filter, any ALLOW rule: it would let traffic out) is
// refused by New, naming the rule with its place; a policy with DENY rules only
// needs nothing more than the sandbox's own network: it runs with the loopback
// only.
func NetRuleRefused(t *testing.T, name string) {
	p := Require(t, name)
	rules := []string{"net=ALLOW|tcp|::1|5432|OUT", "net=ALLOW|tcp|2001:db8::1|443|OUT", "net=ALLOW|tcp|127.0.0.53|53|OUT"}
	if !p.Capabilities().Has(pysandboxes.CapNetHosts) {
		rules = append(rules, "net=ALLOW|tcp|127.0.0.1|80|OUT")
	}
	for _, rule := range rules {
		_, err := New(t, name, rule)
		if err == nil || !strings.Contains(err.Error(), "<arg>") || !strings.Contains(err.Error(), strings.TrimPrefix(rule, "net=")) {
			t.Errorf("%s: got %v, want the rule named", rule, err)
		}
	}
	sb := Sandbox(t, name, []string{"net=DENY|TCP|*|*|*"})
	if out := Py(t, sb, "import socket; print([n for _, n in socket.if_nameindex()])"); !strings.Contains(out, "['lo']") {
		t.Errorf("got %s", out)
	}
}

// BadParamsRefused: the provider's own lines of a policy file (params, after
// its first line os-sandbox=<name>) that it must refuse are refused all
// together by New, each named by the file and its line, and the error gives
// every one of the reasons whys.
func BadParamsRefused(t *testing.T, name string, params, whys []string) {
	Require(t, name)
	file := filepath.Join(t.TempDir(), ".py-sandboxes")
	lines := append([]string{"os-sandbox=" + name}, params...)
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(context.Background(), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.WithLogger(QuietLogger()), pysandboxes.AcceptUnenforced(Accepted(name)))
	if err == nil {
		t.Fatal("the sandbox was made")
	}
	msg := err.Error()
	for i := 2; i <= len(lines); i++ {
		if ref := ".py-sandboxes(" + strconv.Itoa(i) + "): " + lines[i-1]; !strings.Contains(msg, ref) {
			t.Errorf("the error does not name line %d (%q):\n%s", i, ref, msg)
		}
	}
	for _, why := range whys {
		if !strings.Contains(msg, why) {
			t.Errorf("the error does not say %q:\n%s", why, msg)
		}
	}
}

// ListenNeedsAnInRule: an IN rule lets the program listen on its ports (port
// 0: any ephemeral port) and talk to itself over its loopback, and on no other
// port (Landlock's TCP bind rules: EACCES). mptcp is the outcome of making an
// MPTCP socket, which goes around Landlock's rules ("" where the provider
// cannot refuse it).
func ListenNeedsAnInRule(t *testing.T, name, mptcp string) {
	sb := Sandbox(t, name, []string{"net=ALLOW|tcp|127.0.0.1|0|IN"})
	out := Py(t, sb, TryPrelude+`
def self_talk():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    c = socket.create_connection(srv.getsockname()); c.close(); srv.close()
attempt("ephemeral", self_talk)
attempt("fixed", lambda: socket.socket().bind(("127.0.0.1", 8080)))
attempt("mptcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close())
`)
	ExpectLine(t, out, "ephemeral OK None")
	ExpectLine(t, out, "fixed EACCES")
	if mptcp != "" {
		ExpectLine(t, out, "mptcp "+mptcp)
	}
}
