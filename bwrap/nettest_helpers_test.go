package bwrap_test

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

// The network tests build a network of their own and send traffic only to it:
//
//	sandbox netns --(tap0, slirp4netns)--> host --(veth 10.233.R.1/24)--> server netns 10.233.R.2, .3
//
// The server namespace runs TCP listeners on 8001-8003 (they greet, then echo)
// and UDP echo servers on 5301-5302, on both addresses.

const (
	tcpA, tcpB, tcpC = 8001, 8002, 8003
	udpA, udpB       = 5301, 5302
)

// testNet is the test network of one test.
type testNet struct {
	subnet  int
	ns      string
	mu      sync.Mutex
	tcp     []string // "local" of every TCP connection accepted
	udp     []string // "local" of every datagram received
	closers []io.Closer
}

func (n *testNet) addr(host int) string { return fmt.Sprintf("10.233.%d.%d", n.subnet, host) }

// newTestNet builds the server namespace (root and iproute2 needed), removed at
// the end of the test.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	p := requireBwrap(t)
	if !p.Capabilities().Has(pysandboxes.CapNetHosts) {
		t.Skip("the network filter is not available here")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the test network needs iproute2 (ip)")
	}
	var b [4]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:3])
	n := &testNet{subnet: int(b[3]), ns: "pysb-bwt-" + id}
	host, peer := "pysbbh"+id, "pysbbs"+id
	cmds := [][]string{
		{"ip", "netns", "add", n.ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", n.ns},
		{"ip", "addr", "add", n.addr(1) + "/24", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", n.ns, "link", "set", "lo", "up"},
		{"ip", "-n", n.ns, "link", "set", peer, "up"},
		{"ip", "-n", n.ns, "addr", "add", n.addr(2) + "/24", "dev", peer},
		{"ip", "-n", n.ns, "addr", "add", n.addr(3) + "/24", "dev", peer},
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

// serve starts the listeners inside the server namespace.
func (n *testNet) serve() error {
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
		for _, p := range []int{tcpA, tcpB, tcpC} {
			ln, err := lc.Listen(context.Background(), "tcp4", ":"+strconv.Itoa(p))
			if err != nil {
				errc <- err
				return
			}
			lns = append(lns, ln)
		}
		for _, h := range []int{2, 3} {
			for _, p := range []int{udpA, udpB} {
				pc, err := net.ListenPacket("udp4", n.addr(h)+":"+strconv.Itoa(p))
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

// saw reports whether the server received TCP (or UDP) traffic on local.
func (n *testNet) saw(udp bool, local string) bool {
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

func (n *testNet) remove() {
	for _, c := range n.closers {
		c.Close()
	}
	exec.Command("ip", "netns", "del", n.ns).Run()
}

// netPrelude is Python code that connects and sends with short timeouts.
const netPrelude = tryPrelude + `
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

// slirps lists the slirp4netns processes of the host.
func slirps() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == "slirp4netns" {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
