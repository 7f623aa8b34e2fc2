package qemu_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/qemu"
)

// hostTCP listens on the host's loopback; it greets every connection and
// counts them.
func hostTCP(t *testing.T, addr, greeting string) (int, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port, &n
}

// hostUDP is a sink on the host's loopback: it keeps what it receives and
// answers "pong" to each datagram.
func hostUDP(t *testing.T, addr string) (int, func() string) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var got atomic.Value
	got.Store("")
	go func() {
		b := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			got.Store(got.Load().(string) + string(b[:n]) + ";")
			pc.WriteTo([]byte("pong"), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port, func() string { return got.Load().(string) }
}

// netProbe runs in the VM: every attempt prints "label outcome".
const netProbe = `
import errno, fcntl, json, socket, struct, sys
A, D, U, V = (int(x) for x in sys.argv[1:5])
def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
def attempt(label, f):
    try:
        print(label, "OK", f())
    except OSError as e:
        print(label, err(e))
    sys.stdout.flush()
def tcp(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect((host, port))
        return s.recv(100).decode() or "eof"
    finally:
        s.close()
def udp(host, port, data, wait=False):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(3)
        n = s.sendto(data, (host, port))
        if wait:
            return s.recv(100).decode()
        return n
    finally:
        s.close()
import os
print("uid", os.getuid())
attempt("tcp-allowed", lambda: tcp("127.0.0.1", A))
attempt("tcp-allowed-name", lambda: tcp("localhost", A))
attempt("tcp-denied-port", lambda: tcp("127.0.0.1", D))
attempt("tcp-other-loopback", lambda: tcp("127.0.0.2", A))
attempt("tcp-gateway-denied-port", lambda: tcp("10.0.3.2", D))
attempt("tcp-filter-gateway", lambda: tcp("10.0.2.2", A))
attempt("tcp-other-address", lambda: tcp("192.0.2.1", 80))
attempt("tcp-rule-host-other-port", lambda: tcp("192.0.2.7", 81))
attempt("tcp6-loopback", lambda: tcp("::1", A, socket.AF_INET6))
attempt("tcp6-other", lambda: tcp("2001:db8::1", 80, socket.AF_INET6))
attempt("udp-allowed", lambda: udp("127.0.0.1", U, b"allowed", wait=True))
attempt("udp-denied-port", lambda: udp("127.0.0.1", V, b"SECRET-loopback"))
attempt("udp-gateway-denied-port", lambda: udp("10.0.3.2", V, b"SECRET-gateway"))
attempt("udp-filter-gateway", lambda: udp("10.0.2.2", V, b"SECRET-filtergw"))
attempt("dns-other-resolver", lambda: udp("127.0.0.53", 53, b"SECRET-dns"))
def broadcast():
    # QEMU maps the broadcast address to its namespace's loopback, as it
    # maps the gateway: only the allowed ports go on to the host's.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    try:
        return s.sendto(b"SECRET-broadcast", ("255.255.255.255", V))
    finally:
        s.close()
attempt("udp-broadcast-denied-port", broadcast)
def query(name):
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for part in name.split("."):
        q += bytes([len(part)]) + part.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)
# QEMU's own resolver asks the host's (from QEMU's namespace): the filter
# refuses that address like any other, so no answer comes.
attempt("dns-qemu-resolver", lambda: udp("10.0.3.3", 53, query("localhost"), wait=True))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close())
def route():
    # SIOCADDRT: a route of its own through another gateway.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rt = bytearray(120)
    struct.pack_into("=H2x4s", rt, 8, socket.AF_INET, socket.inet_aton("192.0.2.0"))
    struct.pack_into("=H2x4s", rt, 24, socket.AF_INET, socket.inet_aton("10.0.3.3"))
    struct.pack_into("=H2x4s", rt, 40, socket.AF_INET, socket.inet_aton("255.255.255.0"))
    struct.pack_into("=H", rt, 56, 0x1 | 0x2)
    fcntl.ioctl(s, 0x890B, bytes(rt))
attempt("add-route", route)
def down():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"eth0", 0))
attempt("eth0-down", down)
print("resolv", json.dumps(open("/etc/resolv.conf").read()))
print("hosts", json.dumps(open("/etc/hosts").read()))
# Forwarded from the host: TCP to a listener on 127.0.0.1, UDP to one on 0.0.0.0.
F, G = int(sys.argv[5]), int(sys.argv[6])
l = socket.socket()
l.bind(("127.0.0.1", F))
l.listen()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", G))
print("listening")
sys.stdout.flush()
l.settimeout(60)
c, _ = l.accept()
c.sendall(b"from-guest")
c.close()
u.settimeout(60)
d, a = u.recvfrom(100)
u.sendto(b"udp-from-guest:" + d, a)
print("served")
`

// TestNetFilter: net= rules are enforced outside the guest. One VM (one
// sandbox, one program) tries everything: the allowed TCP and UDP ports of the
// host's loopback are reached under 127.0.0.1, everything else is refused with
// the errno of the other providers' filter, and the host's listeners say what
// arrived. Every refusal of an address beyond the guest's own loopback is the
// filter's, around QEMU: the guest has no filter of its own, so neither root
// in the guest nor a program changing its routes can lift it.
func TestNetFilter(t *testing.T) {
	requireQEMU(t)
	if err := netfilter.Available(context.Background()); err != nil {
		t.Skipf("the network filter cannot work here: %v", err)
	}
	allowed, allowedSeen := hostTCP(t, "127.0.0.1:0", "hello")
	denied, deniedSeen := hostTCP(t, "127.0.0.1:0", "SECRET")
	udpOK, udpOKGot := hostUDP(t, "127.0.0.1:0")
	udpDenied, udpDeniedGot := hostUDP(t, "127.0.0.1:0")
	dnsGot := func() string { return "" }
	if pc, err := net.ListenPacket("udp4", "127.0.0.53:53"); err == nil {
		pc.Close()
		_, dnsGot = hostUDP(t, "127.0.0.53:53")
	}
	inTCP, inUDP := freePort(t, "tcp4"), freePort(t, "udp4")
	// The unprivileged run boots its one VM: a saved state made for it
	// would cost more (the root run restores one).
	snapshot := "on"
	if os.Getenv(envNetUnprivileged) != "" {
		snapshot = "off"
	}
	dir := t.TempDir()
	pol, _ := writePolicy(t, dir,
		"qemu.snapshot="+snapshot,
		fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", allowed),
		fmt.Sprintf("net=ALLOW|udp|127.0.0.1|%d|OUT", udpOK),
		"net=ALLOW|tcp|192.0.2.7|80|OUT",
		"net=ALLOW|tcp|*|40000-40010|IN",
		fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|IN", inTCP),
		fmt.Sprintf("net=ALLOW|udp|0.0.0.0|%d|IN", inUDP))
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := sb.Command(ctx, python, "-I", "-c", netProbe, strconv.Itoa(allowed), strconv.Itoa(denied), strconv.Itoa(udpOK), strconv.Itoa(udpDenied),
		strconv.Itoa(inTCP), strconv.Itoa(inUDP))
	var out, errb bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var inGot []string
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() == "listening" {
			inGot = forwardedIn(t, inTCP, inUDP)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s\n%s", err, out.String(), errb.String())
	}
	if strings.Join(inGot, " ") != "from-guest udp-from-guest:ping" {
		t.Errorf("from the host's 127.0.0.1 to the forwarded ports: %q", inGot)
	}
	t.Logf("%s", out.String())
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(l, " ")
		got[k] = v
	}
	// The program is the host's uid in the guest (root in a root run), with
	// no capability: it cannot change the guest's routes or interfaces, and
	// the filter is outside the guest anyway.
	if want := strconv.Itoa(os.Geteuid()); got["uid"] != want {
		t.Errorf("the program's uid in the guest: %s, want %s", got["uid"], want)
	}
	for label, want := range map[string]string{
		"tcp-allowed":      "OK hello",
		"tcp-allowed-name": "OK hello",
		// The guest's own loopback: nothing listens there.
		"tcp-denied-port":    "ECONNREFUSED",
		"tcp-other-loopback": "ECONNREFUSED",
		"tcp6-loopback":      "ECONNREFUSED",
		// QEMU's gateway is its namespace's loopback: only the allowed ports
		// lead on to the host's.
		"tcp-gateway-denied-port": "ECONNREFUSED",
		// The filter's reset, outside the guest.
		"tcp-filter-gateway":       "ECONNREFUSED",
		"tcp-other-address":        "ECONNREFUSED",
		"tcp-rule-host-other-port": "ECONNREFUSED",
		"dns-qemu-resolver":        "TimeoutError",
		// No IPv6 in the guest's network.
		"tcp6-other":  "ENETUNREACH",
		"udp-allowed": "OK pong",
		// The program holds no capability.
		"raw":       "EPERM",
		"packet":    "EPERM",
		"add-route": "EPERM",
		"eth0-down": "EPERM",
	} {
		if got[label] != want {
			t.Errorf("%s: %q, want %q", label, got[label], want)
		}
	}
	// A datagram the filter drops leaves the guest's send successful (the
	// guest has no filter): what matters is that nothing arrives.
	for _, label := range []string{"udp-denied-port", "udp-gateway-denied-port", "udp-filter-gateway", "dns-other-resolver", "udp-broadcast-denied-port"} {
		if !strings.HasPrefix(got[label], "OK ") {
			t.Errorf("%s: %q, want the send to succeed in the guest", label, got[label])
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := allowedSeen.Load(); n != 2 {
		t.Errorf("the allowed listener accepted %d connections, want 2", n)
	}
	if n := deniedSeen.Load(); n != 0 {
		t.Errorf("the denied listener accepted %d connections", n)
	}
	if s := udpOKGot(); s != "allowed;" {
		t.Errorf("the allowed UDP sink received %q", s)
	}
	if s := udpDeniedGot(); s != "" {
		t.Errorf("the denied UDP sink received %q", s)
	}
	if s := dnsGot(); s != "" {
		t.Errorf("the resolver on 127.0.0.53 received %q", s)
	}
	var resolv, hosts string
	json.Unmarshal([]byte(got["resolv"]), &resolv)
	json.Unmarshal([]byte(got["hosts"]), &hosts)
	if !strings.Contains(resolv, "nameserver 10.0.2.3\n") {
		t.Errorf("the guest's resolv.conf: %q", resolv)
	}
	if !strings.Contains(hosts, "127.0.0.1\tlocalhost") {
		t.Errorf("the guest's hosts: %q", hosts)
	}
}

// freePort returns a port free on the host's 127.0.0.1 for network nw.
func freePort(t *testing.T, nw string) int {
	t.Helper()
	if nw == "udp4" {
		pc, err := net.ListenPacket(nw, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen(nw, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// forwardedIn connects from the host's 127.0.0.1 to the forwarded TCP port
// and sends a datagram to the forwarded UDP port, returning what the program
// in the guest answered.
func forwardedIn(t *testing.T, tcpPort, udpPort int) []string {
	var got []string
	c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(tcpPort), 10*time.Second)
	if err != nil {
		t.Errorf("connecting to the forwarded port: %v", err)
		return nil
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil {
		t.Errorf("reading from the forwarded port: %v", err)
	}
	got = append(got, string(b))
	u, err := net.Dial("udp4", "127.0.0.1:"+strconv.Itoa(udpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	buf := make([]byte, 100)
	for range 20 {
		u.Write([]byte("ping"))
		u.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := u.Read(buf); err == nil {
			return append(got, string(buf[:n]))
		}
	}
	return append(got, "no answer")
}

// TestNetRulesRefused: a net= rule the VM cannot enforce exactly is refused
// at Prepare, naming the rule and its file(line) and why (fail closed).
func TestNetRulesRefused(t *testing.T) {
	requireQEMU(t)
	if err := netfilter.Available(context.Background()); err != nil {
		t.Skipf("the network filter cannot work here: %v", err)
	}
	for _, c := range []struct{ rule, why string }{
		{"net=ALLOW|tcp|10.0.3.0/24|80|OUT", "the guest's own network"},
		{"net=ALLOW|tcp|10.0.2.2|80|OUT", "egress network"},
		{"net=ALLOW|tcp|127.0.0.1|1000-2000|OUT", "at most 256 can be"},
		{"net=ALLOW|tcp|::1|80|OUT", "IPv6"},
	} {
		dir := t.TempDir()
		pol, path := writePolicy(t, dir, "env=A=b", c.rule)
		_, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
		if err == nil {
			t.Errorf("%s: accepted", c.rule)
			continue
		}
		ref := path + "(2)"
		if !strings.Contains(err.Error(), ref) || !strings.Contains(err.Error(), c.rule[len("net="):]) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v; want it named (%s) with %q", c.rule, err, ref, c.why)
		}
	}
}

// envNetUnprivileged marks the run of TestNetFilter as uid 65534.
const envNetUnprivileged = "PYSANDBOXES_QEMU_NET_UNPRIVILEGED"

// TestNetFilterUnprivileged runs TestNetFilter again as uid 65534: QEMU then
// runs in a user namespace of its own that owns its network namespace, and
// the filter is set up through the network filter's helper (this test binary
// re-executed into those namespaces), slirp4netns joining them itself. The
// run has a cache of its own and boots its VM (no saved state); the guest's
// kernel is copied from this user's cache so as not to extract it again.
func TestNetFilterUnprivileged(t *testing.T) {
	if os.Getenv(envNetUnprivileged) != "" || os.Geteuid() != 0 {
		t.Skip("this is the unprivileged run, or the host is not root: TestNetFilter covers it")
	}
	requireQEMU(t)
	if err := netfilter.Available(context.Background()); err != nil {
		t.Skipf("the network filter cannot work here: %v", err)
	}
	const nobody = 65534
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A short path: Unix socket paths hold 108 bytes.
	dir, err := os.MkdirTemp("/tmp", "pysb-qnet-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "qemu.test")
	copyFile(t, exe, bin, 0o755)
	cache := filepath.Join(dir, "cache", "pysandboxes", "qemu")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{cache, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if base, err := os.UserCacheDir(); err == nil {
		kernels, _ := filepath.Glob(filepath.Join(base, "pysandboxes", "qemu", "vmlinux-*"))
		for _, k := range kernels {
			copyFile(t, k, filepath.Join(cache, filepath.Base(k)), 0o644)
		}
	}
	err = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestNetFilter$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"TMPDIR=" + tmp, envNetUnprivileged + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP: TestNetFilter"):
		t.Skipf("as uid %d: %s", nobody, out)
	case err != nil || !strings.Contains(string(out), "--- PASS: TestNetFilter"):
		t.Fatalf("as uid %d: %v\n%s", nobody, err, out)
	}
	t.Logf("as uid %d:\n%s", nobody, out)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}
