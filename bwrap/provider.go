package bwrap

import (
	"context"
	"fmt"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
)

func init() {
	driver.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "bwrap"

// Provider is the bwrap provider. Importing the package registers one; its zero
// value is ready to use (with pysandboxes.UseProvider, for example).
type Provider struct {
	// Binary, when set, is the bwrap binary to use (default: bwrap in the
	// system's directories, else on PATH when no other user could replace
	// it: package internal/systool).
	Binary string
	// tools finds bwrap when Binary is not set (tests name an empty system
	// directory there).
	tools systool.Finder

	core prepare.Core[hostState]
}

// Name returns "bwrap".
func (p *Provider) Name() string { return Name }

// Probe reports whether bwrap works here: the binary, its version, and one real
// run that creates the sandbox's namespaces (the result is kept for the life of
// the Provider).
func (p *Provider) Probe(context.Context) error { return p.host().err }

// Capabilities is what the provider enforces on this host (see the package
// documentation for the table).
func (p *Provider) Capabilities() driver.Capability {
	h := p.host()
	c := capabilities(h.err == nil, h.seccompErr == nil, h.env != "", h.netErr == nil, h.landlock >= nsutil.ListenABI, h.idErr == nil)
	if c != 0 && h.hideErr == nil {
		// ignore= paths hidden at every lookup, by the filter (package hideview).
		c |= driver.CapHide
	}
	return c
}

// netCapabilities are claimed when the network filter works here.
const netCapabilities = wrapper.NetCapabilities

// capabilities is what the provider enforces when bwrap works (ok), with or
// without seccomp filters, env(1) (which removes the PWD bwrap adds), the
// network filter, Landlock's TCP bind rules (listenOK) and a program that holds
// no host identity (idOK: run as root, bwrap runs as an unprivileged uid; run
// unprivileged, as the caller, in namespaces that show no host process or file
// but the exposed ones).
func capabilities(ok, seccompOK, envOK, netOK, listenOK, idOK bool) driver.Capability {
	if !ok {
		return 0
	}
	// The network namespace has loopback only (or the filter's rules): TCP and UDP
	// reach nothing outside; without any capability no raw or packet socket can be
	// made.
	c := driver.CapFilesRead | driver.CapFilesMeta | driver.CapFilesWrite | driver.CapUnixSockets |
		driver.CapUDPDeny | driver.CapRawSockets | driver.CapSignals |
		driver.CapResourceLimits | driver.CapProcessIsolation | driver.CapUnprivileged |
		driver.CapNoPrivileges
	if envOK {
		c |= driver.CapEnv
	}
	if seccompOK {
		c |= driver.CapSeccomp
	}
	// Listening needs refusing too: Landlock's TCP bind rules, and seccomp to
	// refuse the MPTCP sockets that go around them.
	if seccompOK && listenOK {
		c |= driver.CapTCPPorts
	}
	if netOK {
		c |= netCapabilities
	}
	if idOK {
		c |= driver.CapIdentity
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
		fmt.Sprintf("bubblewrap %s at %s, started by the supervisor (resource limits, whole-tree kill)", h.version, h.bwrap),
		"namespaces: user (no capability: --cap-drop ALL, nested user namespaces disabled), mount, pid, ipc, uts, cgroup, network",
		"file system: a fresh root with only the exposed directories, what the program needs (read-only), /proc of the sandbox, a minimal /dev; never the host's /run, no /tmp unless exposed",
		wrapper.HideDetails("the ignored files present at start are replaced by an unreadable device node, directories by an empty unreadable tmpfs (hide not claimed)"),
	}
	if h.seccompErr != nil {
		out = append(out, "seccomp: unavailable ("+h.seccompErr.Error()+"): seccomp is not claimed")
	} else {
		out = append(out, "seccomp: the filter of internal/seccomp through --seccomp (UDP refused unless a net= rule allows it; raw and packet sockets, mount, namespaces, bpf, keyctl, io_uring... refused)")
	}
	if h.env == "" {
		out = append(out, "env(1) not found: bwrap adds PWD to the environment, so env is not claimed")
	} else {
		out = append(out, "environment: exactly the policy's (--clearenv, --setenv, passed through a descriptor; "+h.env+" removes the PWD bwrap adds)")
	}
	if h.netErr != nil {
		out = append(out, "network: loopback only ("+h.netErr.Error()+"); a policy whose net= rules allow traffic is refused")
	} else {
		out = append(out, "network: loopback only without net= rules; with rules, the network filter (internal/netfilter) on the sandbox's namespace, set up while bwrap holds the program")
	}
	if h.landlock >= nsutil.ListenABI && h.seccompErr == nil {
		out = append(out, fmt.Sprintf("listening: Landlock ABI %d TCP bind rules (only the ports of IN rules), MPTCP refused by seccomp", h.landlock))
	} else {
		out = append(out, "listening: not refused (needs Landlock ABI 4 and seccomp): tcp-ports is not claimed")
	}
	return out
}
