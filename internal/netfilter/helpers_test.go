package netfilter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/policy"
)

// The tests build a small network of their own and send traffic only to it:
//
//	sandbox netns --(tap0, slirp4netns)--> host --(veth 10.231.R.1/24)--> server netns
//	                                                 10.231.R.2, .3, .53, .130, .200
//
// The server namespace runs TCP listeners (8001-8003, 9005, 9500 and 53) and UDP
// echo servers (5301, 5302 and 53) on every address. TestMain runs the package in a
// private mount namespace whose /etc/resolv.conf names 10.231.R.53, so the
// resolver the egress stack forwards the sandbox's DNS to is the test's own.

// envSubnet carries R (the third octet of the test network) into the re-executed
// test binary.
const envSubnet = "PYSANDBOXES_NETFILTER_TEST_SUBNET"

// subnet is R; wrapped reports that the package runs in its own mount namespace
// (without it, the tests that need the test network skip).
var (
	subnet  = 0
	wrapped = false
)

func TestMain(m *testing.M) {
	if v := os.Getenv(envSubnet); v != "" {
		subnet, _ = strconv.Atoi(v)
		wrapped = true
		code := m.Run()
		for _, f := range removeAtExit {
			f()
		}
		os.Exit(code)
	}
	if os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		os.Exit(m.Run())
	}
	var b [1]byte
	rand.Read(b[:])
	r := int(b[0])
	f, err := os.CreateTemp("", "pysandboxes-netfilter-resolv-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(f, "nameserver 10.231.%d.53\n", r)
	f.Chmod(0o644) // slirp4netns reads it as the unprivileged user too
	f.Close()
	defer os.Remove(f.Name())
	args := append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c",
		`mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`, "sh", f.Name(), os.Args[0]}, os.Args[1:]...)
	cmd := exec.Command(unshare, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envSubnet+"="+strconv.Itoa(r))
	err = cmd.Run()
	os.Remove(f.Name())
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// needRoot skips tests that need what Setup needs.
func needRoot(t testing.TB) {
	t.Helper()
	if err := Available(context.Background()); err != nil {
		t.Skipf("the network filter cannot work here: %v", err)
	}
}

// needNet skips tests that need the test network (root, ip, unshare).
func needNet(t testing.TB) {
	t.Helper()
	needRoot(t)
	if !wrapped {
		t.Skip("the test network needs root and util-linux unshare (the package then runs in a private mount namespace)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the test network needs iproute2 (ip)")
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// addr returns 10.231.R.host.
func addr(host int) string { return fmt.Sprintf("10.231.%d.%d", subnet, host) }

// Ports of the test server.
const (
	tcpA, tcpB, tcpC = 8001, 8002, 8003
	tcpRange         = 9005
	tcpHigh          = 9500
	udpA, udpB       = 5301, 5302
)

var serverHosts = []int{2, 3, 53, 130, 200}

// server is the test network: the server namespace with its listeners.
type server struct {
	ns      string // name (ip netns) of the server namespace
	mu      sync.Mutex
	accepts []string // "local->remote" of every TCP connection accepted
	udp     []string // "local<-remote" of every datagram received
}

var (
	srvOnce sync.Once
	srv     *server
	srvErr  error
)

// testServer returns the package's test network, built once (TestMain's process
// removes it with its mount namespace... and the cleanup below the rest).
func testServer(t testing.TB) *server {
	t.Helper()
	needNet(t)
	srvOnce.Do(func() { srv, srvErr = newServer() })
	if srvErr != nil {
		t.Fatalf("test network: %v", srvErr)
	}
	return srv
}

func newServer() (*server, error) {
	id := randHex(3)
	s := &server{ns: "pysb-srv-" + id}
	host, peer := "pysbh"+id, "pysbs"+id
	cmds := [][]string{
		{"ip", "netns", "add", s.ns},
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", s.ns},
		{"ip", "addr", "add", addr(1) + "/24", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", s.ns, "link", "set", "lo", "up"},
		{"ip", "-n", s.ns, "link", "set", peer, "up"},
	}
	for _, h := range serverHosts {
		cmds = append(cmds, []string{"ip", "-n", s.ns, "addr", "add", addr(h) + "/24", "dev", peer})
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			s.remove()
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	removeAtExit = append(removeAtExit, s.remove)
	fd, err := unix.Open(filepath.Join(netnsRunDir, s.ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var lns []net.Listener
	var pcs []net.PacketConn
	err = inNetNS(fd, func() error {
		var lc net.ListenConfig
		lc.SetMultipathTCP(false)
		for _, p := range []int{tcpA, tcpB, tcpC, tcpRange, tcpHigh, 53} {
			ln, err := lc.Listen(context.Background(), "tcp4", ":"+strconv.Itoa(p))
			if err != nil {
				return err
			}
			lns = append(lns, ln)
		}
		// One socket per address: a datagram's socket tells its destination.
		for _, h := range serverHosts {
			for _, p := range []int{udpA, udpB, 53} {
				pc, err := net.ListenPacket("udp4", addr(h)+":"+strconv.Itoa(p))
				if err != nil {
					return err
				}
				pcs = append(pcs, pc)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, ln := range lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				s.mu.Lock()
				s.accepts = append(s.accepts, c.LocalAddr().String()+"->"+c.RemoteAddr().String())
				s.mu.Unlock()
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(5 * time.Second))
					io.WriteString(c, "hello from "+c.LocalAddr().String()+"\n")
					io.Copy(c, c)
				}()
			}
		}()
	}
	for _, pc := range pcs {
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				s.mu.Lock()
				s.udp = append(s.udp, pc.LocalAddr().String()+"<-"+from.String())
				s.mu.Unlock()
				pc.WriteTo(append([]byte("echo:"), buf[:n]...), from)
			}
		}()
	}
	return s, nil
}

// removeAtExit holds the cleanups of the package's shared test state.
var removeAtExit []func()

func (s *server) remove() {
	exec.Command("ip", "netns", "del", s.ns).Run()
}

// mark returns the server's log positions, for sawTCP and sawUDP.
func (s *server) mark() [2]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return [2]int{len(s.accepts), len(s.udp)}
}

// sawTCP reports whether the server accepted a connection on local ("ip:port")
// since the mark.
func (s *server) sawTCP(since [2]int, local string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accepts[since[0]:] {
		if strings.HasPrefix(a, local+"->") {
			return true
		}
	}
	return false
}

// sawUDP reports whether the server received a datagram on local since the mark.
func (s *server) sawUDP(since [2]int, local string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.udp[since[1]:] {
		if strings.HasPrefix(a, local+"<-") {
			return true
		}
	}
	return false
}

// sandbox is a process in new user and network namespaces (as the namespace
// providers make them), for Setup to set up.
type sandbox struct {
	cmd *exec.Cmd
	ns  Namespace
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		// No Pdeathsig: it fires when the forking thread ends, and the threads
		// that join namespaces end.
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("sandbox process: %v", err)
	}
	sb := &sandbox{cmd: cmd, ns: Namespace{
		Net:  fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid),
		User: fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid),
		PID:  cmd.Process.Pid,
	}}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return sb
}

// setup compiles the rules (a rule file's lines) and sets the filter up in a new
// sandbox; the session is closed at the end of the test.
func setup(t testing.TB, rules ...string) (*sandbox, *Filter, *Session) {
	t.Helper()
	f := compileRules(t, rules...)
	sb := newSandbox(t)
	s, err := f.Setup(context.Background(), sb.ns)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb, f, s
}

// ruleFile is the name the test rules are parsed as.
const ruleFile = "/work/test/.py-sandboxes"

// loadRules parses the rules as the lines of a rule file; host names resolve
// through a hosts file that maps srv.test and srv2.test to the test server.
func loadRules(t testing.TB, rules ...string) (*policy.Network, error) {
	t.Helper()
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	content := fmt.Sprintf("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n%s srv.test\n%s srv2.test\n%s srv2.test\nfd00:231::2 v6only.test\n",
		addr(2), addr(3), addr(130))
	if err := os.WriteFile(hosts, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(context.Background(), ruleFile, []byte(strings.Join(rules, "\n")+"\n"),
		&policy.Options{HostsFile: hosts, Env: []string{}, Dir: dir, Home: dir, Logger: slog.New(slog.DiscardHandler), Resolver: &net.Resolver{PreferGo: true,
			Dial: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no DNS in tests") }}})
	if err != nil {
		return nil, err
	}
	return p.Network(), nil
}

func compileRules(t testing.TB, rules ...string) *Filter {
	t.Helper()
	n, err := loadRules(t, rules...)
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	f, err := Compile(n)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return f
}

// in runs fn on a thread inside the sandbox's network namespace: the sockets it
// makes belong to the sandbox.
func (sb *sandbox) in(t testing.TB, fn func()) {
	t.Helper()
	fd, err := unix.Open(sb.ns.Net, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := inNetNS(fd, func() error { fn(); return nil }); err != nil {
		t.Fatal(err)
	}
}

// dialTimeout is how long a test waits for a connection or an answer that a
// filter may drop.
const dialTimeout = 300 * time.Millisecond

// dial connects from the sandbox (plain TCP: Go's MPTCP default is for listeners).
func (sb *sandbox) dial(t testing.TB, network, address string) (net.Conn, error) {
	t.Helper()
	var c net.Conn
	var err error
	sb.in(t, func() {
		d := net.Dialer{Timeout: dialTimeout}
		c, err = d.Dial(network, address)
	})
	return c, err
}

// tcp connects from the sandbox, reads the server's greeting and closes.
func (sb *sandbox) tcp(t testing.TB, address string) error {
	t.Helper()
	c, err := sb.dial(t, "tcp4", address)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !strings.HasPrefix(string(buf[:n]), "hello") {
		return fmt.Errorf("unexpected greeting %q", buf[:n])
	}
	return nil
}

// udp sends a datagram from the sandbox and waits for the echo.
func (sb *sandbox) udp(t testing.TB, address string) error {
	t.Helper()
	c, err := sb.dial(t, "udp4", address)
	if err != nil {
		return err
	}
	defer c.Close()
	msg := "ping " + randHex(4)
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 128)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "echo:"+msg {
		return fmt.Errorf("unexpected answer %q", buf[:n])
	}
	return nil
}

// wantRefused asserts a TCP refusal by the filter: connect(2) fails with
// ECONNREFUSED (the filter answers with a reset) and the server saw nothing.
func wantRefused(t testing.TB, sb *sandbox, s *server, address string) {
	t.Helper()
	var m [2]int
	if s != nil {
		m = s.mark()
	}
	err := sb.tcp(t, address)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("TCP %s from the sandbox: got %v, want ECONNREFUSED", address, err)
	}
	if s != nil && s.sawTCP(m, address) {
		t.Errorf("TCP %s: the server accepted a connection the filter should have refused", address)
	}
}

// wantUDPRefused asserts a UDP refusal: the send fails with EPERM.
func wantUDPRefused(t testing.TB, sb *sandbox, s *server, address string) {
	t.Helper()
	var m [2]int
	if s != nil {
		m = s.mark()
	}
	err := sb.udp(t, address)
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("UDP %s from the sandbox: got %v, want EPERM", address, err)
	}
	if s != nil {
		time.Sleep(50 * time.Millisecond) // a datagram that got through would be logged by now
	}
	if s != nil && s.sawUDP(m, address) {
		t.Errorf("UDP %s: the server received a datagram the filter should have dropped", address)
	}
}

// hostListener listens on the host's 127.0.0.1 (a free port) and counts the
// connections it accepts.
type hostListener struct {
	ln    net.Listener
	port  int
	mu    sync.Mutex
	count int
}

func newHostListener(t testing.TB) *hostListener {
	t.Helper()
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostListener{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.count++
			h.mu.Unlock()
			io.WriteString(c, "hello from the host\n")
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return h
}

func (h *hostListener) accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// freePort returns a TCP port free on the host's 127.0.0.1 (now).
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tableIn reports whether the namespace at path holds the filter's table.
func tableIn(t testing.TB, path string) bool {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ok, err := hasTable(fd)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// slirpChildren lists the slirp4netns processes that are children of this process.
func slirpChildren() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(slirp4netns") {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me && f[0] != "Z" {
			pid, _ := strconv.Atoi(e.Name())
			out = append(out, pid)
		}
	}
	return out
}
