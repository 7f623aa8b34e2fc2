package netfilter

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestLoopbackOnlyWithoutRules(t *testing.T) {
	testServer(t)
	host := newHostListener(t)
	sb, f, s := setup(t)
	if f.Egress() || f.ResolvConf() != nil {
		t.Errorf("Egress = %v, ResolvConf = %q: want no egress", f.Egress(), f.ResolvConf())
	}
	if !strings.Contains(f.String(), "loopback only") {
		t.Errorf("String = %q", f.String())
	}
	var ifs []net.Interface
	sb.in(t, func() { ifs, _ = net.Interfaces() })
	if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
		t.Errorf("interfaces = %+v, want lo only, up", ifs)
	}
	// 127.0.0.1 is the sandbox's own loopback: the host's listener is not there.
	wantRefused(t, sb, nil, "127.0.0.1:"+strconv.Itoa(host.port))
	if host.accepted() != 0 {
		t.Errorf("the host's loopback listener accepted a connection from the sandbox")
	}
	if err := sb.tcp(t, addr(2)+":8001"); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("TCP to the test server: got %v, want ENETUNREACH", err)
	}
	if err := sb.udp(t, addr(2)+":5301"); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("UDP to the test server: got %v, want ENETUNREACH", err)
	}
	// The sandbox's own loopback works.
	sb.in(t, func() {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Write([]byte("hello inside\n"))
				c.Close()
			}
		}()
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Errorf("the sandbox's own loopback: %v", err)
			return
		}
		c.Close()
	})
	if tableIn(t, sb.ns.Net) || len(slirpChildren()) != 0 || s.slirp != nil {
		t.Errorf("a loopback-only sandbox got a table or an egress stack")
	}
}

func TestHostLoopbackRule(t *testing.T) {
	host := newHostListener(t)
	other := newHostListener(t)
	sb, f, _ := setup(t, "net=ALLOW|tcp|127.0.0.1|"+strconv.Itoa(host.port)+"|OUT")
	if !f.Egress() {
		t.Fatal("a host-loopback rule needs the egress stack")
	}
	c, err := sb.dial(t, "tcp4", "127.0.0.1:"+strconv.Itoa(host.port))
	if err != nil {
		t.Fatalf("the allowed port of the host's loopback: %v", err)
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	c.Close()
	if string(buf[:n]) != "hello from the host\n" || host.accepted() != 1 {
		t.Errorf("read %q, host accepted %d: want the host's listener", buf[:n], host.accepted())
	}
	// Another port of 127.0.0.1 stays the sandbox's own; the gateway is closed.
	wantRefused(t, sb, nil, "127.0.0.1:"+strconv.Itoa(other.port))
	wantRefused(t, sb, nil, "10.0.2.2:"+strconv.Itoa(other.port))
	wantRefused(t, sb, nil, "10.0.2.2:"+strconv.Itoa(host.port))
	if other.accepted() != 0 || host.accepted() != 1 {
		t.Errorf("host listeners accepted %d and %d connections, want 0 and 1", other.accepted(), host.accepted())
	}
}

func TestHostLoopbackClosedWithoutRule(t *testing.T) {
	testServer(t)
	host := newHostListener(t)
	sb, f, _ := setup(t, "net=ALLOW|tcp|srv.test|8001|OUT", "net=ALLOW|tcp|10.0.0.0/8|*|OUT")
	if !strings.Contains(f.String(), "--disable-host-loopback") {
		t.Errorf("String does not say the host's loopback is off:\n%s", f)
	}
	wantRefused(t, sb, nil, "127.0.0.1:"+strconv.Itoa(host.port))
	wantRefused(t, sb, nil, "10.0.2.2:"+strconv.Itoa(host.port))
	if host.accepted() != 0 {
		t.Errorf("the host's loopback listener accepted a connection from the sandbox")
	}
}

func TestHostLoopbackDenyBeatsAllow(t *testing.T) {
	host := newHostListener(t)
	sb, _, _ := setup(t, "net=ALLOW|tcp|*|*|OUT", "net=DENY|tcp|localhost|"+strconv.Itoa(host.port)+"|OUT")
	wantRefused(t, sb, nil, "127.0.0.1:"+strconv.Itoa(host.port))
	wantRefused(t, sb, nil, "10.0.2.2:"+strconv.Itoa(host.port))
	if host.accepted() != 0 {
		t.Errorf("the host's loopback listener accepted a connection the DENY rule refuses")
	}
}

// dialBound connects from the sandbox with the socket bound to the tap interface
// (SO_BINDTODEVICE needs no privilege): loopback destinations then route by it.
func (sb *sandbox) dialBound(t *testing.T, address string) error {
	t.Helper()
	var err error
	sb.in(t, func() {
		d := net.Dialer{Timeout: dialTimeout, Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptString(int(fd), syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, TapName)
			})
			return serr
		}}
		var c net.Conn
		if c, err = d.Dial("tcp4", address); err == nil {
			c.Close()
		}
	})
	return err
}

func TestHostLoopbackNotThroughTheTap(t *testing.T) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	host := newHostListener(t)
	// Every address on the port, the loopback network included, is allowed: the
	// host's loopback is still reached only at 127.0.0.1, by the redirection.
	sb, _, _ := setup(t, "net=ALLOW|tcp|*|"+port+","+strconv.Itoa(host.port)+"|OUT")
	for _, a := range []string{"127.0.0.2:" + port, "127.0.0.1:" + strconv.Itoa(host.port)} {
		if err := sb.dialBound(t, a); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s by the tap interface: got %v, want ECONNREFUSED", a, err)
		}
	}
	wantRefused(t, sb, nil, "127.0.0.2:"+port) // the sandbox's own 127.0.0.2
	if len(accepted) != 0 || host.accepted() != 0 {
		t.Errorf("the host's loopback accepted a connection by the tap interface")
	}
	if err := sb.tcp(t, "127.0.0.1:"+strconv.Itoa(host.port)); err != nil {
		t.Errorf("the redirection to the host's 127.0.0.1: %v", err)
	}
	if host.accepted() != 1 {
		t.Errorf("the host's 127.0.0.1 accepted %d connections, want 1", host.accepted())
	}
}
