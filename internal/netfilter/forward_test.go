package netfilter

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listenIn listens in the sandbox and answers every connection with a greeting.
func (sb *sandbox) listenIn(t *testing.T, address string) {
	t.Helper()
	var ln net.Listener
	sb.in(t, func() {
		var lc net.ListenConfig
		lc.SetMultipathTCP(false)
		var err error
		if ln, err = lc.Listen(context.Background(), "tcp4", address); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hello from the sandbox\n")
			c.Close()
		}
	}()
}

// dialHost connects from the host to 127.0.0.1:port and returns the greeting.
func dialHost(port int) (string, error) {
	c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestINForwardFromHostLoopback(t *testing.T) {
	port, other := freePort(t), freePort(t)
	sb, f, s := setup(t, "net=ALLOW|tcp|127.0.0.1|"+strconv.Itoa(port)+"|IN")
	if fw := f.Forwards(); len(fw) != 1 || fw[0].Port != uint16(port) || fw[0].Rule.Ref.Line != 1 {
		t.Fatalf("Forwards = %+v", fw)
	}
	sb.listenIn(t, "127.0.0.1:"+strconv.Itoa(port))
	sb.listenIn(t, "127.0.0.1:"+strconv.Itoa(other))
	got, err := dialHost(port)
	if err != nil || got != "hello from the sandbox\n" {
		t.Fatalf("the host's 127.0.0.1:%d: %q, %v; want the sandbox's listener", port, got, err)
	}
	if _, err := dialHost(other); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a port no rule forwards: got %v, want ECONNREFUSED", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialHost(port); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after Close: got %v, want ECONNREFUSED", err)
	}
}

func TestINForwardWildcardListener(t *testing.T) {
	port := freePort(t)
	sb, _, _ := setup(t, "net=ALLOW|tcp|0.0.0.0|"+strconv.Itoa(port)+"|IN")
	sb.listenIn(t, "0.0.0.0:"+strconv.Itoa(port))
	if got, err := dialHost(port); err != nil || got != "hello from the sandbox\n" {
		t.Fatalf("the host's 127.0.0.1:%d: %q, %v; want the sandbox's listener", port, got, err)
	}
}

func TestINForwardHostPortInUse(t *testing.T) {
	host := newHostListener(t)
	f := compileRules(t, "net=ALLOW|tcp|localhost|"+strconv.Itoa(host.port)+"|IN")
	sb := newSandbox(t)
	s, err := f.Setup(context.Background(), sb.ns)
	if err == nil {
		s.Close()
		t.Fatal("Setup succeeded although the host's port is taken")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), ruleFile+"(1)") || !strings.Contains(err.Error(), strconv.Itoa(host.port)) {
		t.Errorf("error %q does not name the rule and the port", err)
	}
	if tableIn(t, sb.ns.Net) {
		t.Errorf("a failed Setup left its table behind")
	}
	if p := slirpChildren(); len(p) != 0 {
		t.Errorf("a failed Setup left slirp4netns running: %v", p)
	}
}
