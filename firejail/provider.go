package firejail

import (
	"context"
	"fmt"
	"os"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
)

func init() {
	driver.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "firejail"

// Provider is the firejail provider. Importing the package registers one; its
// zero value is ready to use (with pysandboxes.UseProvider, for example).
type Provider struct {
	// Binary, when set, is the firejail binary to use (default: firejail in the
	// system's directories, else on PATH when no other user could replace
	// it: package internal/systool).
	Binary string
	// tools finds firejail when Binary is not set (tests name an empty system
	// directory there).
	tools systool.Finder

	core prepare.Core[hostState]
	// envs caches what firejail does to environments, by the names they hold.
	envs envCache
}

// Name returns "firejail".
func (p *Provider) Name() string { return Name }

// Probe reports whether firejail works here: the binary, this user's right to
// run it, and one real run that must isolate a program (kept for the life of
// the Provider).
func (p *Provider) Probe(context.Context) error { return p.host().err }

// Capabilities is what the provider enforces on this host (see the package
// documentation for the table).
func (p *Provider) Capabilities() driver.Capability {
	h := p.host()
	c := capabilities(h.err == nil, h.env != "", h.netErr == nil, h.listen)
	if c != 0 && h.idErr == nil && os.Geteuid() == 0 {
		// firejail runs for an unprivileged uid that owns nothing of the host's.
		c |= driver.CapIdentity
	}
	if c != 0 && h.hideErr == nil {
		// ignore= paths hidden at every lookup, by the filter (package hideview).
		c |= driver.CapHide
	}
	return c
}

// netCapabilities are claimed when the network filter works here.
const netCapabilities = wrapper.NetCapabilities

// capabilities is what the provider enforces when firejail works (ok), with or
// without env(1) (which removes the variables firejail adds), the network
// filter and Landlock's TCP bind rules (listenOK). Never CapUnprivileged:
// firejail is a setuid-root program.
func capabilities(ok, envOK, netOK, listenOK bool) driver.Capability {
	if !ok {
		return 0
	}
	c := driver.CapFilesRead | driver.CapFilesWrite | driver.CapUnixSockets |
		driver.CapUDPDeny | driver.CapRawSockets | driver.CapSignals |
		driver.CapResourceLimits | driver.CapSeccomp | driver.CapProcessIsolation |
		driver.CapNoPrivileges
	if envOK {
		c |= driver.CapEnv
	}
	if listenOK {
		c |= driver.CapTCPPorts
	}
	if netOK {
		c |= netCapabilities
	}
	return c
}

// Details describes what the provider does on this host, one line each, for
// `pysandboxes probe`.
func (p *Provider) Details() []string {
	h := p.host()
	if h.err != nil {
		return []string{h.err.Error()}
	}
	out := []string{
		fmt.Sprintf("firejail %s at %s (setuid root; refuses non-root users not listed in /etc/firejail/firejail.users), started by the supervisor (resource limits, whole-tree kill)", h.version, h.firejail),
		"no capability (--caps.drop=all), no_new_privs, firejail's seccomp filter plus io_uring, bpf, userfaultfd, ptrace, mount, namespaces and similar; --restrict-namespaces, native architecture only; sockets: unix, inet, inet6, netlink",
		"file system: the whole tree read-only; every top directory not needed is blacklisted; what is needed is whitelisted (exposed directories read-only or read-write, what the program needs read-only); a private /dev (and /dev/shm); the host's /run hidden",
		wrapper.HideDetails("the ignored paths present at start are blacklisted (hide not claimed)"),
		"start cost: firejail takes some 40 ms more than other namespace providers to set a sandbox up",
	}
	if h.env == "" {
		out = append(out, "env(1) not found: firejail adds variables to the environment, so env is not claimed")
	} else {
		out = append(out, "environment: exactly the policy's (the variables firejail adds are removed by "+h.env+")")
	}
	if h.netErr != nil {
		out = append(out, "network: loopback only (--net=none; "+h.netErr.Error()+"); a policy whose net= rules allow traffic is refused")
	} else {
		out = append(out, "network: loopback only without net= rules; with rules, a named network namespace set up by the network filter before firejail joins it (--netns); UDP sockets cannot be refused (datagrams reach only the sandbox's loopback and the filter's resolver)")
	}
	if h.listen {
		out = append(out, "listening: Landlock TCP bind rules on firejail and the program (only the ports of IN rules); MPTCP listeners go around them, unreachable from outside")
	} else {
		out = append(out, "listening: not refused (needs root and Landlock ABI 4): tcp-ports is not claimed")
	}
	switch {
	case h.idmap:
		out = append(out, fmt.Sprintf("identity: firejail runs for uid %d, gid %d (an account for it in a private view of "+
			"/etc/passwd and /etc/group), the exposed directories idmapped to it (the host's files there are its own)", hostid.UID, hostid.GID))
	case h.idErr != nil:
		out = append(out, "identity: NOT enforced: "+h.idErr.Error())
	}
	return out
}
