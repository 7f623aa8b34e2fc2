package unshare_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// requireFilter skips a test that needs the network filter, saying why.
func requireFilter(t testing.TB) {
	t.Helper()
	p := requireUnshare(t)
	if !p.Capabilities().Has(pysandboxes.CapNetHosts) {
		d, _ := p.(interface{ Details() []string })
		t.Skipf("the network filter cannot work here: %s", strings.Join(d.Details(), "; "))
	}
}

// listener is a test's TCP listener on the host that greets with its name.
func listener(t testing.TB, addr, greeting string) int {
	t.Helper()
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, greeting)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

const netPrelude = tryPrelude + `
def connect(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
        return s.recv(100).decode()
    finally:
        s.close()
def sendto(host, port, data):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        return s.sendto(data, (host, port))
    finally:
        s.close()
`

// TestFilterHostLoopback: with net= rules the network filter is set up before
// the program starts: a TCP port of the host's 127.0.0.1 that a rule allows is
// reached, another is refused; UDP sockets are refused when no rule allows UDP
// (the resolver is then asked over TCP); the pinned names are in /etc/hosts; a
// port no IN rule allows cannot be bound (Landlock), an allowed one can; and the
// egress stack is gone once the program ended.
func TestFilterHostLoopback(t *testing.T) {
	requireFilter(t)
	allowed := listener(t, "127.0.0.1:0", "hello")
	denied := listener(t, "127.0.0.1:0", "SECRET")
	before := slirpProcesses()
	sb := sandbox(t, []string{fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", allowed), "net=ALLOW|tcp|127.0.0.1|48123|IN"})
	out := py(t, sb, netPrelude+`
allowed, denied = int(sys.argv[1]), int(sys.argv[2])
attempt("allowed", lambda: connect("127.0.0.1", allowed))
attempt("denied", lambda: connect("127.0.0.1", denied))
attempt("udp", lambda: sendto("127.0.0.1", allowed, b"SECRET"))
attempt("elsewhere", lambda: connect("192.0.2.1", 80))
print("resolv", open("/etc/resolv.conf").read().replace("\n", "|"))
print("hosts-localhost", any(l.split()[1:2] == ["localhost"] for l in open("/etc/hosts") if l.strip() and not l.startswith("#")))
def bind(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return "bound"
    finally:
        s.close()
attempt("bind-allowed", lambda: bind(48123))
attempt("bind-other", lambda: bind(48124))
`, strconv.Itoa(allowed), strconv.Itoa(denied))
	expectLine(t, out, "allowed OK hello")
	expectLine(t, out, "denied ECONNREFUSED")
	if seccomp.Available() == nil {
		expectLine(t, out, "udp EPERM")
	} // else: the datagram stays on the sandbox's own loopback
	if !strings.Contains(out, "elsewhere ECONNREFUSED") && !strings.Contains(out, "elsewhere ENETUNREACH") {
		t.Errorf("a connection no rule allows was not refused:\n%s", out)
	}
	if !strings.Contains(out, "nameserver 10.0.2.3") || !strings.Contains(out, "use-vc") {
		t.Errorf("resolv.conf: not the filter's resolver over TCP:\n%s", out)
	}
	expectLine(t, out, "hosts-localhost True")
	expectLine(t, out, "bind-allowed OK bound")
	if landlockTCPBind() {
		expectLine(t, out, "bind-other EACCES")
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("a denied listener answered:\n%s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(slirpProcesses()) > len(before) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := slirpProcesses(); len(after) > len(before) {
		t.Errorf("egress stacks left: %v (before: %v)", after, before)
	}
}

// TestFilterInForward: an ALLOW IN rule on 127.0.0.1 forwards its port from the
// host's loopback to the program's listener.
func TestFilterInForward(t *testing.T) {
	requireFilter(t)
	port := freePort(t)
	sb := sandbox(t, []string{fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|IN", port)})
	cmd := sb.Command(context.Background(), python(t), "-I", "-c", `
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
c, _ = s.accept()
c.sendall(b"from the sandbox")
c.close()
`, strconv.Itoa(port))
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	io.ReadFull(stdout, buf)
	c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		cmd.Wait()
		t.Fatalf("the forwarded port: %v", err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if err := cmd.Wait(); err != nil || string(got) != "from the sandbox" {
		t.Errorf("got %q, %v", got, err)
	}
}

// TestFilterHosts: through a network the test makes (a server namespace behind a
// veth pair, two addresses), a rule for one address lets only that address's port
// through: the same port on the other address, another port, and UDP to a port
// no rule allows are refused; a UDP rule lets its datagrams reach the server.
func TestFilterHosts(t *testing.T) {
	requireFilter(t)
	srv := testNetwork(t)
	sb := sandbox(t, []string{
		fmt.Sprintf("net=ALLOW|tcp|%s|%d|OUT", srv.addr(2), srv.tcp),
		fmt.Sprintf("net=ALLOW|udp|%s|%d|OUT", srv.addr(2), srv.udp),
	})
	out := py(t, sb, netPrelude+`
a, b, tcp, tcp2, udp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
attempt("allowed", lambda: connect(a, tcp))
attempt("other-host", lambda: connect(b, tcp))
attempt("other-port", lambda: connect(a, tcp2))
attempt("udp-allowed", lambda: sendto(a, udp, b"ping"))
attempt("udp-other-host", lambda: sendto(b, udp, b"SECRET"))
`, srv.addr(2), srv.addr(3), strconv.Itoa(srv.tcp), strconv.Itoa(srv.tcp2), strconv.Itoa(srv.udp))
	expectLine(t, out, "allowed OK hello from "+srv.addr(2))
	expectLine(t, out, "other-host ECONNREFUSED")
	expectLine(t, out, "other-port ECONNREFUSED")
	expectLine(t, out, "udp-allowed OK 4")
	expectLine(t, out, "udp-other-host EPERM")
	if !srv.received("ping", 3*time.Second) {
		t.Error("the allowed datagram did not reach the server")
	}
	if srv.received("SECRET", 300*time.Millisecond) || strings.Contains(out, "hello from "+srv.addr(3)) {
		t.Errorf("the server saw refused traffic:\n%s", out)
	}
}

// testServer is a network made by the test: a server namespace behind a veth
// pair, addresses 10.233.R.2 and .3, a TCP greeter on two ports and a UDP sink.
type testServer struct {
	subnet         int
	tcp, tcp2, udp int
	mu             sync.Mutex
	got            []string
}

func (s *testServer) addr(h int) string { return fmt.Sprintf("10.233.%d.%d", s.subnet, h) }

func (s *testServer) received(what string, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		for _, g := range s.got {
			if strings.Contains(g, what) {
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testNetwork(t *testing.T) *testServer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the test network (a namespace and a veth pair) needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the test network needs iproute2 (ip)")
	}
	var b [3]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s := &testServer{subnet: int(b[0]), tcp: 8001, tcp2: 8002, udp: 5301}
	ns, host, peer := "pysb-unshare-"+id, "pysbuh"+id, "pysbus"+id
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, c := range [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns},
		{"addr", "add", s.addr(1) + "/24", "dev", host},
		{"link", "set", host, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "set", peer, "up"},
		{"-n", ns, "addr", "add", s.addr(2) + "/24", "dev", peer},
		{"-n", ns, "addr", "add", s.addr(3) + "/24", "dev", peer},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	done := make(chan error, 1)
	go func() {
		// A thread of its own joins the server's namespace to make the sockets,
		// and is never given back to the runtime.
		runtime.LockOSThread()
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		var lns []net.Listener
		for _, p := range []int{s.tcp, s.tcp2} {
			var lc net.ListenConfig
			lc.SetMultipathTCP(false)
			l, err := lc.Listen(context.Background(), "tcp4", ":"+strconv.Itoa(p))
			if err != nil {
				done <- err
				return
			}
			lns = append(lns, l)
		}
		pc, err := net.ListenPacket("udp4", ":"+strconv.Itoa(s.udp))
		if err != nil {
			done <- err
			return
		}
		for _, l := range lns {
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					io.WriteString(c, "hello from "+strings.Split(c.LocalAddr().String(), ":")[0])
					c.Close()
				}
			}()
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 2048)
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				s.mu.Lock()
				s.got = append(s.got, string(buf[:n]))
				s.mu.Unlock()
			}
		}()
		done <- nil
		select {}
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return s
}

// slirpProcesses lists the running slirp4netns processes.
func slirpProcesses() []int { return providertest.Slirps() }

// freePort returns a TCP port of the host's loopback that is free now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// landlockTCPBind reports whether the kernel's Landlock restricts TCP binds
// (ABI 4).
func landlockTCPBind() bool {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1)
	return errno == 0 && v >= 4
}

// TestFilterOverExposedEtc: with /etc exposed, the filter's /etc/hosts and
// /etc/resolv.conf are mounted over the host's files (the sandbox starts: the
// data is mounted before its scratch name goes), and the rest of /etc is the
// host's.
func TestFilterOverExposedEtc(t *testing.T) {
	requireFilter(t)
	host, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skip("no /etc/passwd here:", err)
	}
	allowed := listener(t, "127.0.0.1:0", "hello")
	port := freePort(t)
	sb := sandbox(t, []string{"expose-ro=/etc", fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", allowed),
		fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|IN", port)})
	out := py(t, sb, netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
print("resolv", open("/etc/resolv.conf").read().replace("\n", "|"))
print("hosts", open("/etc/hosts").read().replace("\n", "|"))
print("passwd", len(open("/etc/passwd").read()))
`, strconv.Itoa(allowed))
	expectLine(t, out, "allowed OK hello")
	if !strings.Contains(out, "|nameserver 10.0.2.3|") {
		t.Errorf("resolv.conf: not the filter's:\n%s", out)
	}
	if !strings.Contains(out, "hosts # The sandbox's hosts file") {
		t.Errorf("hosts: not the filter's:\n%s", out)
	}
	expectLine(t, out, "passwd "+strconv.Itoa(len(host)))
}
