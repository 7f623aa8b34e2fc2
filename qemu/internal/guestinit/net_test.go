package main

import (
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// freePort returns a port free on 127.0.0.1 for network nw.
func freePort(t *testing.T, nw string) string {
	t.Helper()
	if nw == "udp4" {
		pc, err := net.ListenPacket(nw, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().String()
	}
	l, err := net.Listen(nw, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRelays: a TCP relay carries both ways and passes the end of each
// direction on; a connection its target refuses is reset; a UDP relay
// carries datagrams and their answers, per source.
func TestRelays(t *testing.T) {
	target, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				b, _ := io.ReadAll(c)
				c.Write(append([]byte("echo:"), b...))
				c.Close()
			}()
		}
	}()
	utarget, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer utarget.Close()
	go func() {
		b := make([]byte, 100)
		for {
			n, from, err := utarget.ReadFrom(b)
			if err != nil {
				return
			}
			utarget.WriteTo(append([]byte("pong:"), b[:n]...), from)
		}
	}()
	tcpFrom, refusedFrom, udpFrom := freePort(t, "tcp4"), freePort(t, "tcp4"), freePort(t, "udp4")
	refused := freePort(t, "tcp4") // nothing listens there
	err = startRelays(&wire.NetMsg{Relays: []wire.Relay{
		{Proto: "tcp", From: tcpFrom, To: target.Addr().String()},
		{Proto: "tcp", From: refusedFrom, To: refused},
		{Proto: "udp", From: udpFrom, To: utarget.LocalAddr().String()},
	}})
	if err != nil {
		t.Fatal(err)
	}

	c, err := net.Dial("tcp4", tcpFrom)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "echo:hello" {
		t.Errorf("through the TCP relay: %q, %v", b, err)
	}

	// The reset may come before the dialer has seen its connection
	// established (the relay accepts, dials, is refused and resets at once):
	// then the dial itself fails with ECONNRESET.
	c, err = net.Dial("tcp4", refusedFrom)
	if err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 10))
		c.Close()
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a relay whose target refuses: %v, want ECONNRESET", err)
	}

	buf := make([]byte, 100)
	for i := range 2 {
		u, err := net.Dial("udp4", udpFrom)
		if err != nil {
			t.Fatal(err)
		}
		msg := "ping" + strconv.Itoa(i)
		u.Write([]byte(msg))
		u.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := u.Read(buf)
		u.Close()
		if err != nil || string(buf[:n]) != "pong:"+msg {
			t.Errorf("through the UDP relay, source %d: %q, %v", i, buf[:n], err)
		}
	}

	// A relay whose address is taken fails, naming it.
	if err := startRelays(&wire.NetMsg{Relays: []wire.Relay{{Proto: "tcp", From: tcpFrom, To: refused}}}); err == nil {
		t.Error("a relay on a port in use started")
	}
	if err := startRelays(&wire.NetMsg{Relays: []wire.Relay{{Proto: "sctp", From: "127.0.0.1:1", To: refused}}}); err == nil {
		t.Error("a relay of an unknown protocol started")
	}
}
