package providertest

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

	"github.com/pysandboxes/pysandboxes"
	"golang.org/x/sys/unix"
)

// The network tests of a provider build a network of their own and send traffic only to it:
//
//	sandbox netns --(tap0, slirp4netns)--> host --(veth 10.N.R.1/24)--> server netns 10.N.R.2, .3
//
// where N is the provider's own (so that tests of several providers running at
// once do not meet) and R is random.
//
// The server namespace runs TCP listeners on 8001-8003 (they greet, then echo)
// and UDP echo servers on 5301-5302, on both addresses.

const (
	TCPA, TCPB, TCPC = 8001, 8002, 8003
	UDPA, UDPB       = 5301, 5302
)

// Net is the test network of one test.
type Net struct {
	octet   int // the second byte of the addresses
	subnet  int
	ns      string
	mu      sync.Mutex
	tcp     []string // "local" of every TCP connection accepted
	udp     []string // "local" of every datagram received
	closers []io.Closer
}

// Addr is the address of host (1: the host's end, 2 and 3: the servers).
func (n *Net) Addr(host int) string { return fmt.Sprintf("10.%d.%d.%d", n.octet, n.subnet, host) }

// NewNet builds the server namespace (root and iproute2 needed), removed at the
// end of the test, for the tests of the provider name. octet is the second byte
// of its addresses (10.octet.R.0/24); tag names its namespace (pysb-<tag>t-...)
// and, by its first letter, its veth pair (pysb<t>h..., pysb<t>s...).
func NewNet(t *testing.T, name string, octet int, tag string) *Net {
	t.Helper()
	p := Require(t, name)
	if os.Geteuid() != 0 {
		t.Skip("the test network (a namespace and a veth pair) needs root")
	}
	if !p.Capabilities().Has(pysandboxes.CapNetHosts) {
		t.Skip("the network filter is not available here")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the test network needs iproute2 (ip)")
	}
	var b [4]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:3])
	n := &Net{octet: octet, subnet: int(b[3]), ns: "pysb-" + tag + "t-" + id}
	host, peer := "pysb"+tag[:1]+"h"+id, "pysb"+tag[:1]+"s"+id
	cmds := [][]string{
		{"ip", "netns", "add", n.ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", n.ns},
		{"ip", "addr", "add", n.Addr(1) + "/24", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", n.ns, "link", "set", "lo", "up"},
		{"ip", "-n", n.ns, "link", "set", peer, "up"},
		{"ip", "-n", n.ns, "addr", "add", n.Addr(2) + "/24", "dev", peer},
		{"ip", "-n", n.ns, "addr", "add", n.Addr(3) + "/24", "dev", peer},
	}
	t.Cleanup(n.remove)
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	if err := n.serve(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNet is NewNet with the addresses of the provider name's own tests
// (10.233 for bwrap, 10.234 for firejail, 10.235 for unshare), so that the
// tests of several providers running at once do not meet.
func TestNet(t *testing.T, name string) *Net {
	t.Helper()
	octet, tag := map[string]int{"bwrap": 233, "firejail": 234, "unshare": 235}[name], name[:2]
	if octet == 0 {
		t.Fatalf("no test network for %s", name)
	}
	return NewNet(t, name, octet, tag)
}

// serve starts the listeners inside the server namespace.
func (n *Net) serve() error {
	fd, err := unix.Open("/run/netns/"+n.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var lns []net.Listener
	var pcs []net.PacketConn
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread is thrown away afterwards (never unlocked)
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		var lc net.ListenConfig
		lc.SetMultipathTCP(false)
		for _, p := range []int{TCPA, TCPB, TCPC} {
			ln, err := lc.Listen(context.Background(), "tcp4", ":"+strconv.Itoa(p))
			if err != nil {
				errc <- err
				return
			}
			lns = append(lns, ln)
		}
		for _, h := range []int{2, 3} {
			for _, p := range []int{UDPA, UDPB} {
				pc, err := net.ListenPacket("udp4", n.Addr(h)+":"+strconv.Itoa(p))
				if err != nil {
					errc <- err
					return
				}
				pcs = append(pcs, pc)
			}
		}
		errc <- unix.Setns(self, unix.CLONE_NEWNET)
	}()
	if err := <-errc; err != nil {
		return err
	}
	for _, ln := range lns {
		n.closers = append(n.closers, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				n.mu.Lock()
				n.tcp = append(n.tcp, c.LocalAddr().String())
				n.mu.Unlock()
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(5 * time.Second))
					io.WriteString(c, "hello\n")
				}()
			}
		}()
	}
	for _, pc := range pcs {
		n.closers = append(n.closers, pc)
		go func() {
			buf := make([]byte, 2048)
			for {
				k, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				n.mu.Lock()
				n.udp = append(n.udp, pc.LocalAddr().String())
				n.mu.Unlock()
				pc.WriteTo(append([]byte("echo:"), buf[:k]...), from)
			}
		}()
	}
	return nil
}

// Saw reports whether the server received TCP (or UDP) traffic on local.
func (n *Net) Saw(udp bool, local string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	list := n.tcp
	if udp {
		list = n.udp
	}
	for _, l := range list {
		if l == local {
			return true
		}
	}
	return false
}

func (n *Net) remove() {
	for _, c := range n.closers {
		c.Close()
	}
	exec.Command("ip", "netns", "del", n.ns).Run()
}

// NetPrelude is TryPrelude with Python code that connects and sends with short timeouts.
const NetPrelude = TryPrelude + `
def tcp(host, port):
    s = socket.create_connection((host, port), timeout=5)
    try:
        return s.recv(100).decode().strip()
    finally:
        s.close()
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    try:
        s.sendto(b"ping", (host, port))
        return s.recv(100).decode()
    finally:
        s.close()
`

// Slirps lists the slirp4netns processes of the host.
func Slirps() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == "slirp4netns" {
			if pid, err := strconv.Atoi(e.Name()); err == nil && descendant(pid, os.Getpid()) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// descendant reports whether pid is a descendant of ancestor (the egress stacks
// of other test binaries running at the same time are not this test's).
func descendant(pid, ancestor int) bool {
	for range 32 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			return false
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil || ppid <= 1 {
			return false
		}
		if ppid == ancestor {
			return true
		}
		pid = ppid
	}
	return false
}
