package landlock_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

const unixPrelude = providertest.TryPrelude + `
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
	p := providertest.Require(t, "landlock")
	withSeccomp := seccomp.Available() == nil
	if !withSeccomp && !p.Capabilities().Has(pysandboxes.CapSignals) {
		t.Skip("neither seccomp nor the Landlock ABI 6 scope")
	}
	dir := t.TempDir()
	named := filepath.Join(dir, "run", "docker.sock")
	os.MkdirAll(filepath.Dir(named), 0o755)
	providertest.Serve(t, "unix", named, "HOSTSOCKET")
	abstract := fmt.Sprintf("pysb-landlock-test-%d", os.Getpid())
	providertest.Serve(t, "unix", "@"+abstract, "HOSTSOCKET")
	sb := sandbox(t, nil)
	out := providertest.Py(t, sb, unixPrelude+`
attempt("named", lambda: unix(sys.argv[1]))
attempt("abstract", lambda: unix("\0" + sys.argv[2]))
attempt("pair", pair)
`, named, abstract)
	providertest.ExpectLine(t, out, "abstract EPERM") // seccomp, or the Landlock scope without it
	providertest.ExpectLine(t, out, "pair OK b'pair'")
	if !withSeccomp {
		return // named sockets: not enforced (and not claimed) before ABI 9
	}
	providertest.ExpectLine(t, out, "named EPERM")
	if strings.Contains(out, "HOSTSOCKET") {
		t.Errorf("a host socket answered:\n%s", out)
	}
}

// TestUnixSocketsAllowParam: landlock.unix-sockets=allow is refused before ABI 9
// unless unix-sockets is accepted; accepted, programs may create Unix sockets, and
// the ABI 6 scope still refuses the host's abstract sockets.
func TestUnixSocketsAllowParam(t *testing.T) {
	p := providertest.Require(t, "landlock")
	providertest.RequireSeccomp(t)
	if p.Capabilities().Has(pysandboxes.CapUnixSockets) && !p.Capabilities().Has(pysandboxes.CapSeccomp) {
		t.Skip("ABI 9: named sockets are filtered by Landlock itself")
	}
	_, err := providertest.New(t, "landlock", "landlock.unix-sockets=allow")
	if err == nil || !strings.Contains(err.Error(), "landlock.unix-sockets=allow") || !strings.Contains(err.Error(), "unix-sockets") {
		t.Fatalf("want a refusal naming the parameter, got %v", err)
	}
	_, err = providertest.New(t, "landlock", "landlock.bogus=1")
	if err == nil || !strings.Contains(err.Error(), "landlock.bogus=1") {
		t.Fatalf("want a refusal naming landlock.bogus=1, got %v", err)
	}
	abstract := fmt.Sprintf("pysb-landlock-allow-%d", os.Getpid())
	providertest.Serve(t, "unix", "@"+abstract, "HOSTSOCKET")
	sb := sandbox(t, []string{"landlock.unix-sockets=allow"}, pysandboxes.AcceptUnenforced(pysandboxes.CapUnixSockets))
	out := providertest.Py(t, sb, unixPrelude+`
attempt("create", lambda: socket.socket(socket.AF_UNIX).close())
attempt("abstract", lambda: unix("\0" + sys.argv[1]))
`, abstract)
	providertest.ExpectLine(t, out, "create OK None")
	if seccomp.Available() == nil && p.Capabilities().Has(pysandboxes.CapSignals) {
		providertest.ExpectLine(t, out, "abstract EPERM") // the Landlock scope (ABI 6)
	}
}
