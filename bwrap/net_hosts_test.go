package bwrap_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
)

// TestNetHostLoopbackAndNames: an OUT rule for the host's 127.0.0.1 reaches a
// listener of the host on that port only (any other port of 127.0.0.1 is the
// sandbox's own loopback); the sandbox's /etc/hosts holds the pinned names
// (localhost here) and its /etc/resolv.conf names the filter's resolver.
func TestNetHostLoopbackAndNames(t *testing.T) {
	requireBwrap(t)
	newTestNet(t) // skips without the filter
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host\n"))
			c.Close()
		}
	}()
	other, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	sb := sandbox(t, []string{"net=ALLOW|tcp|localhost|" + port + "|OUT"})
	out := py(t, sb, netPrelude+`
attempt("host", lambda: tcp("localhost", int(sys.argv[1])))
attempt("other", lambda: tcp("127.0.0.1", int(sys.argv[2])))
print("resolv", open("/etc/resolv.conf").read().split("\n")[1])
print("hosts", [l for l in open("/etc/hosts").read().splitlines() if l.startswith("127.0.0.1")])
`, port, strconv.Itoa(other.Addr().(*net.TCPAddr).Port))
	expectLine(t, out, "host OK host")
	expectLine(t, out, "other ECONNREFUSED")
	expectLine(t, out, "resolv nameserver 10.0.2.3")
	if !strings.Contains(out, "127.0.0.1\\tlocalhost") {
		t.Errorf("hosts file:\n%s", out)
	}
}

// TestNetNoLeaks: runs with the filter leave no slirp4netns, descriptor or child
// behind.
func TestNetNoLeaks(t *testing.T) {
	n := newTestNet(t)
	sb := sandbox(t, []string{"net=ALLOW|tcp|" + n.Addr(2) + "|" + strconv.Itoa(tcpA) + "|OUT"})
	ctx := context.Background()
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	before, _ := proctest.OpenFDs()
	slirpBefore := len(slirps())
	for i := 0; i < 10; i++ {
		if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(slirps()) > slirpBefore && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s := slirps(); len(s) > slirpBefore {
		t.Errorf("slirp4netns left: %v", s)
	}
	if after, _ := proctest.OpenFDs(); after != before {
		t.Errorf("descriptors: %d before, %d after", before, after)
	}
}
