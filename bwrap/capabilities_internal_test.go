package bwrap

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// TestCapabilitiesTable: what the provider claims, with and without seccomp,
// env(1) and the network filter; never what it cannot enforce.
func TestCapabilitiesTable(t *testing.T) {
	const base = driver.CapFilesRead | driver.CapFilesMeta | driver.CapFilesWrite | driver.CapUnixSockets |
		driver.CapUDPDeny | driver.CapRawSockets | driver.CapSignals |
		driver.CapResourceLimits | driver.CapProcessIsolation | driver.CapUnprivileged |
		driver.CapNoPrivileges
	const sc = driver.CapSeccomp
	for _, tc := range []struct {
		ok, sc, env, net, listen, id bool
		want                         driver.Capability
	}{
		{false, true, true, true, true, true, 0},
		{true, false, false, false, true, false, base},
		{true, true, false, false, false, false, base | sc},
		{true, true, false, false, true, false, base | sc | driver.CapTCPPorts},
		{true, true, true, false, true, false, base | sc | driver.CapEnv | driver.CapTCPPorts},
		{true, true, true, true, true, false, base | sc | driver.CapEnv | netCapabilities | driver.CapTCPPorts},
		{true, true, true, true, true, true, base | sc | driver.CapEnv | netCapabilities | driver.CapTCPPorts | driver.CapIdentity},
	} {
		got := capabilities(tc.ok, tc.sc, tc.env, tc.net, tc.listen, tc.id)
		if got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc, got, tc.want)
		}
		if !tc.net && (got.Has(driver.CapNetHosts) || got.Has(driver.CapUDP)) {
			t.Errorf("%+v: claims network filtering without the filter: %s", tc, got)
		}
	}
}

// TestRegisteredCapabilities: the registered provider claims what this host gives.
func TestRegisteredCapabilities(t *testing.T) {
	p := &Provider{}
	if err := p.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	h := p.host()
	want := capabilities(true, h.seccompErr == nil, h.env != "", h.netErr == nil, h.landlock >= nsutil.ListenABI, h.idErr == nil)
	if h.hideErr == nil {
		want |= driver.CapHide
	}
	if got := p.Capabilities(); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestProbeMissingBinary: a missing bwrap (in no system directory, nor on PATH)
// is a probe error saying how to get it, and no capability is claimed.
func TestProbeMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	p := &Provider{tools: systool.Finder{System: []string{t.TempDir()}}}
	err := p.Probe(context.Background())
	if !errors.Is(err, systool.ErrNotFound) || p.Capabilities() != 0 {
		t.Fatalf("got %v, caps %s", err, p.Capabilities())
	}
	if want := "install the bubblewrap package"; !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q, want it to say %q", err, want)
	}
}

// TestUnprivileged: bwrap makes the sandbox's namespaces without privilege (run
// as nobody by root, or as the unprivileged user running the test): what
// CapUnprivileged claims.
func TestUnprivileged(t *testing.T) {
	uid := os.Getuid()
	p := &Provider{}
	if err := p.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	h := p.host()
	cmd := exec.Command(h.bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
		"--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "id -u; cat /proc/self/uid_map")
	if uid == 0 {
		uid = 65534
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// id -u, then the uid map: the sandbox's user is the caller's (one id mapped).
	if got := strings.Fields(string(out)); len(got) != 4 || got[0] != strconv.Itoa(uid) || got[1] != strconv.Itoa(uid) || got[3] != "1" {
		t.Fatalf("got %q, want uid %d, mapped alone", out, uid)
	}
}
