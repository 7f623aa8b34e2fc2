package unshare_test

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// TestNetworkLoopbackOnly: without a net= rule the sandbox has a network of its
// own with the loopback interface only: a listener on the host's 127.0.0.1 and an
// abstract Unix socket of the host are out of reach, no route leads anywhere, UDP,
// raw and packet sockets are refused, and no TCP port can be bound (with Landlock
// ABI 4; without it, a listener the program opens cannot be reached from the
// host).
func TestNetworkLoopbackOnly(t *testing.T) {
	sb := sandbox(t, nil)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SECRET"))
			c.Close()
		}
	}()
	abstract, err := net.Listen("unix", "@pysb-unshare-test-"+strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	cmd := sb.Command(context.Background(), providertest.Python(t), "-I", "-c", providertest.TryPrelude+`
port, name = int(sys.argv[1]), sys.argv[2]
print("ifaces", sorted(n for _, n in socket.if_nameindex()))
def connect(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        return s.recv(10)
    finally:
        s.close()
def unix(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr)
        return s.recv(10)
    finally:
        s.close()
attempt("host-listener", lambda: connect("127.0.0.1", port))
attempt("elsewhere", lambda: connect("192.0.2.1", 80))
attempt("abstract", lambda: unix("\0" + name))
attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
srv = socket.socket()
try:
    srv.bind(("127.0.0.1", 0))
except OSError as e:
    # Without an IN rule, TCP ports cannot be bound (Landlock).
    print("bind", errno.errorcode.get(e.errno))
    print("listening none", flush=True)
    sys.exit(0)
srv.listen()
attempt("own-loopback", lambda: socket.create_connection(("127.0.0.1", srv.getsockname()[1]), 3).close() is None)
print("listening", srv.getsockname()[1], flush=True)
sys.stdin.readline()
`, port, "pysb-unshare-test-"+port)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	br := bufio.NewReader(stdout)
	inside := ""
	for {
		line, err := br.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			break
		}
		if f := strings.Fields(line); len(f) == 2 && f[0] == "listening" {
			inside = f[1]
			break
		}
	}
	if inside != "" && inside != "none" && inside != port {
		// The sandbox's listener is not the host's: nothing answers there.
		if c, err := net.DialTimeout("tcp4", "127.0.0.1:"+inside, time.Second); err == nil {
			c.Close()
			t.Errorf("the host reached the sandbox's listener on port %s", inside)
		}
	}
	stdin.Close()
	rest, _ := br.ReadString(0)
	out.WriteString(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	o := out.String()
	providertest.ExpectLine(t, o, "ifaces ['lo']")
	providertest.ExpectLine(t, o, "host-listener ECONNREFUSED")
	providertest.ExpectLine(t, o, "elsewhere ENETUNREACH")
	providertest.ExpectLine(t, o, "abstract ECONNREFUSED")
	if landlockTCPBind() {
		providertest.ExpectLine(t, o, "bind EACCES")
	} else {
		providertest.ExpectLine(t, o, "own-loopback OK True")
	}
	if seccomp.Available() == nil {
		providertest.ExpectLine(t, o, "udp EPERM")
	}
	providertest.ExpectLine(t, o, "raw EPERM")
	providertest.ExpectLine(t, o, "packet EPERM")
	if strings.Contains(o, "SECRET") {
		t.Errorf("the host's listener answered:\n%s", o)
	}
}

// TestNetworkRulesRefused: see providertest.NetRuleRefused.
func TestNetworkRulesRefused(t *testing.T) { providertest.NetRuleRefused(t, "unshare") }
