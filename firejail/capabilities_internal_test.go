package firejail

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// TestCapabilitiesTable: what the provider claims, with and without env(1) and
// the network filter; never unprivileged (firejail is setuid root), never
// network filtering without the filter.
func TestCapabilitiesTable(t *testing.T) {
	const base = driver.CapFilesRead | driver.CapFilesWrite | driver.CapUnixSockets |
		driver.CapUDPDeny | driver.CapRawSockets | driver.CapSignals |
		driver.CapResourceLimits | driver.CapSeccomp | driver.CapProcessIsolation | driver.CapNoPrivileges
	for _, tc := range []struct {
		ok, env, net, listen bool
		want                 driver.Capability
	}{
		{false, true, true, true, 0},
		{true, false, false, false, base},
		{true, true, false, false, base | driver.CapEnv},
		{true, true, false, true, base | driver.CapEnv | driver.CapTCPPorts},
		{true, true, true, true, base | driver.CapEnv | netCapabilities | driver.CapTCPPorts},
	} {
		got := capabilities(tc.ok, tc.env, tc.net, tc.listen)
		if got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc, got, tc.want)
		}
		if got.Has(driver.CapUnprivileged) {
			t.Errorf("%+v: claims unprivileged", tc)
		}
		if !tc.net && (got.Has(driver.CapNetHosts) || got.Has(driver.CapUDP)) {
			t.Errorf("%+v: claims network filtering without the filter: %s", tc, got)
		}
	}
}

// TestProbeMissingBinary: a missing firejail (in no system directory, nor on
// PATH) is a probe error saying how to get it, and no capability is claimed.
func TestProbeMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	p := &Provider{tools: systool.Finder{System: []string{t.TempDir()}}}
	err := p.Probe(context.Background())
	if !errors.Is(err, systool.ErrNotFound) || !strings.Contains(err.Error(), "install the firejail package") || p.Capabilities() != 0 {
		t.Fatalf("got %v, caps %s", err, p.Capabilities())
	}
}

// TestNonRootRefusedByFirejail: as a user that firejail does not let use it
// (not listed in /etc/firejail/firejail.users, or with no login shell, as
// nobody), firejail refuses to run, what the probe explains, and why the
// provider never claims unprivileged. Run as root, the test runs firejail as
// nobody; run by another user, as that user, whose probe must then fail and
// claim nothing.
func TestNonRootRefusedByFirejail(t *testing.T) {
	p := &Provider{}
	perr := p.Probe(context.Background())
	name := "nobody"
	if os.Getuid() != 0 {
		u, err := user.Current()
		if err != nil {
			t.Skipf("who runs the test: %v", err)
		}
		name = u.Username
	} else if perr != nil {
		t.Skip(perr)
	}
	bin := p.host().firejail
	if bin == "" {
		t.Skip(perr)
	}
	if b, err := os.ReadFile("/etc/firejail/firejail.users"); err == nil && slices.Contains(strings.Fields(string(b)), name) {
		t.Skipf("%s is allowed to use firejail here (/etc/firejail/firejail.users)", name)
	}
	cmd := exec.Command(bin, "--quiet", "--noprofile", "--net=none", "/bin/true")
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err == nil {
		if os.Getuid() != 0 {
			t.Skipf("firejail lets %s use it here (a login shell, no /etc/firejail/firejail.users)", name)
		}
		t.Fatalf("firejail ran as nobody: %s", out)
	}
	if !strings.Contains(string(out), "not allowed") {
		t.Logf("firejail as %s: %v: %s", name, err, out)
	}
	if os.Getuid() != 0 && (perr == nil || p.Capabilities() != 0) {
		t.Errorf("firejail refuses %s, yet the probe says %v and claims %s", name, perr, p.Capabilities())
	}
}

// TestProfileLines: options become profile lines; those the profile syntax cannot
// hold stay on the command line.
func TestProfileLines(t *testing.T) {
	profile, cmdline := profileLines([]string{"--nonewprivs", "--whitelist=/a b", "--blacklist=/x#y", "--read-only=/t "})
	if strings.Join(profile, "|") != "nonewprivs|whitelist /a b" {
		t.Errorf("profile %q", profile)
	}
	if strings.Join(cmdline, "|") != "--blacklist=/x#y|--read-only=/t " {
		t.Errorf("command line %q", cmdline)
	}
}
