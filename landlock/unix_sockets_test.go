package landlock_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// listenUnix listens on a Unix socket of the host (name starting with "@" is
// abstract) and accepts connections.
func listenUnix(t *testing.T, name string) {
	t.Helper()
	l, err := net.Listen("unix", name)
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
			c.Write([]byte("HOSTSOCKET"))
			c.Close()
		}
	}()
}

const unixPrelude = tryPrelude + `
def unix(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect(addr)
        return s.recv(100)
    finally:
        s.close()
def pair():
    a, b = socket.socketpair()
    a.send(b"pair")
    r = b.recv(10)
    a.close(); b.close()
    return r
`

// TestHostUnixSocketsUnreachable: a named socket in a directory that is not
// exposed (a fake docker.sock) and an abstract socket of the host cannot be
// reached; socketpair still works.
func TestHostUnixSocketsUnreachable(t *testing.T) {
	p := requireLandlock(t)
	withSeccomp := seccomp.Available() == nil
	if !withSeccomp && !p.Capabilities().Has(pysandboxes.CapSignals) {
		t.Skip("neither seccomp nor the Landlock ABI 6 scope")
	}
	dir := t.TempDir()
	named := filepath.Join(dir, "run", "docker.sock")
	os.MkdirAll(filepath.Dir(named), 0o755)
	listenUnix(t, named)
	abstract := fmt.Sprintf("pysb-landlock-test-%d", os.Getpid())
	listenUnix(t, "@"+abstract)
	sb := sandbox(t, nil)
	out := py(t, sb, unixPrelude+`
attempt("named", lambda: unix(sys.argv[1]))
attempt("abstract", lambda: unix("\0" + sys.argv[2]))
attempt("pair", pair)
`, named, abstract)
	expectLine(t, out, "abstract EPERM") // seccomp, or the Landlock scope without it
	expectLine(t, out, "pair OK b'pair'")
	if !withSeccomp {
		return // named sockets: not enforced (and not claimed) before ABI 9
	}
	expectLine(t, out, "named EPERM")
	if strings.Contains(out, "HOSTSOCKET") {
		t.Errorf("a host socket answered:\n%s", out)
	}
}

// TestUnixSocketsAllowParam: landlock.unix-sockets=allow is refused before ABI 9
// unless unix-sockets is accepted; accepted, programs may create Unix sockets, and
// the ABI 6 scope still refuses the host's abstract sockets.
func TestUnixSocketsAllowParam(t *testing.T) {
	p := requireLandlock(t)
	requireSeccomp(t)
	if p.Capabilities().Has(pysandboxes.CapUnixSockets) && !p.Capabilities().Has(pysandboxes.CapSeccomp) {
		t.Skip("ABI 9: named sockets are filtered by Landlock itself")
	}
	_, err := pysandboxes.New(context.Background(), build(t, "landlock.unix-sockets=allow"), pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(netCapsIfNoSeccomp()))
	if err == nil || !strings.Contains(err.Error(), "landlock.unix-sockets=allow") || !strings.Contains(err.Error(), "unix-sockets") {
		t.Fatalf("want a refusal naming the parameter, got %v", err)
	}
	_, err = pysandboxes.New(context.Background(), build(t, "landlock.bogus=1"), pysandboxes.WithProvider("landlock"), pysandboxes.WithLogger(quietLogger()), pysandboxes.AcceptUnenforced(netCapsIfNoSeccomp()))
	if err == nil || !strings.Contains(err.Error(), "landlock.bogus=1") {
		t.Fatalf("want a refusal naming landlock.bogus=1, got %v", err)
	}
	abstract := fmt.Sprintf("pysb-landlock-allow-%d", os.Getpid())
	listenUnix(t, "@"+abstract)
	sb := sandbox(t, []string{"landlock.unix-sockets=allow"}, pysandboxes.AcceptUnenforced(pysandboxes.CapUnixSockets))
	out := py(t, sb, unixPrelude+`
attempt("create", lambda: socket.socket(socket.AF_UNIX).close())
attempt("abstract", lambda: unix("\0" + sys.argv[1]))
`, abstract)
	expectLine(t, out, "create OK None")
	if seccomp.Available() == nil && p.Capabilities().Has(pysandboxes.CapSignals) {
		expectLine(t, out, "abstract EPERM") // the Landlock scope (ABI 6)
	}
}
