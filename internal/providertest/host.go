package providertest

import (
	"context"
	"io"
	"net"
	"testing"
)

// Serve listens on the host at addr of network ("tcp4", or "unix" with a name
// starting with "@" for an abstract socket), without MPTCP, until the test
// ends: every connection is greeted (when greeting is not empty) and closed.
func Serve(t testing.TB, network, addr, greeting string) net.Listener {
	t.Helper()
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(context.Background(), network, addr)
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
	return l
}

// ServeTCP is Serve on a free port of the host's 127.0.0.1; it returns the
// port.
func ServeTCP(t testing.TB, greeting string) int {
	t.Helper()
	return Serve(t, "tcp4", "127.0.0.1:0", greeting).Addr().(*net.TCPAddr).Port
}

// FreePort returns a TCP port of the host's 127.0.0.1 that was free a moment
// ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
