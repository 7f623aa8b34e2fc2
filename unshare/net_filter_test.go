package unshare_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
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
	p := providertest.Require(t, "unshare")
	if !p.Capabilities().Has(pysandboxes.CapNetHosts) {
		d, _ := p.(interface{ Details() []string })
		t.Skipf("the network filter cannot work here: %s", strings.Join(d.Details(), "; "))
	}
}

const netPrelude = providertest.TryPrelude + `
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
	allowed := providertest.ServeTCP(t, "hello")
	denied := providertest.ServeTCP(t, "SECRET")
	before := slirpProcesses()
	sb := sandbox(t, []string{fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", allowed), "net=ALLOW|tcp|127.0.0.1|48123|IN"})
	out := providertest.Py(t, sb, netPrelude+`
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
	providertest.ExpectLine(t, out, "allowed OK hello")
	providertest.ExpectLine(t, out, "denied ECONNREFUSED")
	if seccomp.Available() == nil {
		providertest.ExpectLine(t, out, "udp EPERM")
	} // else: the datagram stays on the sandbox's own loopback
	if !strings.Contains(out, "elsewhere ECONNREFUSED") && !strings.Contains(out, "elsewhere ENETUNREACH") {
		t.Errorf("a connection no rule allows was not refused:\n%s", out)
	}
	if !strings.Contains(out, "nameserver 10.0.2.3") || !strings.Contains(out, "use-vc") {
		t.Errorf("resolv.conf: not the filter's resolver over TCP:\n%s", out)
	}
	providertest.ExpectLine(t, out, "hosts-localhost True")
	providertest.ExpectLine(t, out, "bind-allowed OK bound")
	if landlockTCPBind() {
		providertest.ExpectLine(t, out, "bind-other EACCES")
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
	port := providertest.FreePort(t)
	sb := sandbox(t, []string{fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|IN", port)})
	cmd := sb.Command(context.Background(), providertest.Python(t), "-I", "-c", `
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

// TestFilterHosts: through a network the test makes (providertest.NewNet: a
// server namespace behind a veth pair, two addresses), a rule for one address
// lets only that address's port through: the same port on the other address,
// another port, and UDP to an address no rule allows are refused; a UDP rule
// lets its datagrams reach the server, and the replies come back.
func TestFilterHosts(t *testing.T) {
	requireFilter(t)
	n := providertest.TestNet(t, "unshare")
	a, b := n.Addr(2), n.Addr(3)
	sb := sandbox(t, []string{
		fmt.Sprintf("net=ALLOW|tcp|%s|%d|OUT", a, providertest.TCPA),
		fmt.Sprintf("net=ALLOW|udp|%s|%d|OUT", a, providertest.UDPA),
	})
	out := providertest.Py(t, sb, providertest.NetPrelude+`
a, b, tcp_a, tcp_b, udp_a = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def send(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        return s.sendto(b"SECRET", (host, port))
    finally:
        s.close()
attempt("allowed", lambda: tcp(a, tcp_a))
attempt("other-host", lambda: tcp(b, tcp_a))
attempt("other-port", lambda: tcp(a, tcp_b))
attempt("udp-allowed", lambda: udp(a, udp_a))
attempt("udp-other-host", lambda: send(b, udp_a))
`, a, b, strconv.Itoa(providertest.TCPA), strconv.Itoa(providertest.TCPB), strconv.Itoa(providertest.UDPA))
	providertest.ExpectLine(t, out, "allowed OK hello")
	providertest.ExpectLine(t, out, "other-host ECONNREFUSED")
	providertest.ExpectLine(t, out, "other-port ECONNREFUSED")
	providertest.ExpectLine(t, out, "udp-allowed OK echo:ping")
	providertest.ExpectLine(t, out, "udp-other-host EPERM")
	if !n.Saw(false, fmt.Sprintf("%s:%d", a, providertest.TCPA)) || !n.Saw(true, fmt.Sprintf("%s:%d", a, providertest.UDPA)) {
		t.Errorf("the server did not see the allowed connection and datagram:\n%s", out)
	}
	for _, refused := range []struct {
		udp  bool
		addr string
	}{{false, fmt.Sprintf("%s:%d", b, providertest.TCPA)}, {false, fmt.Sprintf("%s:%d", a, providertest.TCPB)}, {true, fmt.Sprintf("%s:%d", b, providertest.UDPA)}} {
		if n.Saw(refused.udp, refused.addr) {
			t.Errorf("the server saw refused traffic to %s (udp: %v)", refused.addr, refused.udp)
		}
	}
}

// slirpProcesses lists the running slirp4netns processes.
func slirpProcesses() []int { return providertest.Slirps() }

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
	allowed := providertest.ServeTCP(t, "hello")
	port := providertest.FreePort(t)
	sb := sandbox(t, []string{"expose-ro=/etc", fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|OUT", allowed),
		fmt.Sprintf("net=ALLOW|tcp|127.0.0.1|%d|IN", port)})
	out := providertest.Py(t, sb, netPrelude+`
attempt("allowed", lambda: connect("127.0.0.1", int(sys.argv[1])))
print("resolv", open("/etc/resolv.conf").read().replace("\n", "|"))
print("hosts", open("/etc/hosts").read().replace("\n", "|"))
print("passwd", len(open("/etc/passwd").read()))
`, strconv.Itoa(allowed))
	providertest.ExpectLine(t, out, "allowed OK hello")
	if !strings.Contains(out, "|nameserver 10.0.2.3|") {
		t.Errorf("resolv.conf: not the filter's:\n%s", out)
	}
	if !strings.Contains(out, "hosts # The sandbox's hosts file") {
		t.Errorf("hosts: not the filter's:\n%s", out)
	}
	providertest.ExpectLine(t, out, "passwd "+strconv.Itoa(len(host)))
}
