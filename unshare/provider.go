package unshare

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hidefs"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/launch"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

func init() {
	driver.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "unshare"

// Provider is the unshare provider. Importing the package registers one; its zero
// value is ready to use (with UseProvider, for example).
type Provider struct {
	core prepare.Core[hostState]
}

func (p *Provider) host() hostState {
	return p.core.Host(func() hostState { return probeHost(context.Background()) })
}

// Name returns "unshare".
func (p *Provider) Name() string { return Name }

// Probe reports whether the provider works here: the kernel's namespaces, the
// sysctls that restrict user namespaces, and a trial sandbox (made once per
// process).
func (p *Provider) Probe(context.Context) error { return p.host().err }

// Capabilities is what the provider enforces on this host (see the package
// documentation for the table).
func (p *Provider) Capabilities() driver.Capability {
	return capabilities(p.host())
}

// capabilities is what the provider enforces on a host.
func capabilities(h hostState) driver.Capability {
	if h.err != nil {
		return 0
	}
	c := driver.CapEnv | driver.CapFilesRead | driver.CapFilesWrite |
		driver.CapUnixSockets | driver.CapTCPPorts | driver.CapUDPDeny | driver.CapRawSockets |
		driver.CapSignals | driver.CapResourceLimits | driver.CapProcessIsolation | driver.CapNoPrivileges
	if h.seccompErr == nil {
		c |= driver.CapSeccomp
	}
	if h.unprivileged {
		c |= driver.CapUnprivileged
	}
	if h.hideErr == nil {
		// ignore= paths hidden at every lookup, by the filter (package hideview).
		c |= driver.CapHide
	}
	if h.idErr == nil {
		// Run as root, the sandbox's root is an unprivileged host uid; run
		// unprivileged, it is the caller's own uid, in namespaces that show no
		// host process, IPC object or file but the exposed ones.
		c |= driver.CapIdentity | driver.CapFilesMeta
	} else {
		c |= driver.CapFilesMeta
	}
	if h.netErr == nil {
		// The network filter: TCP and UDP by host, address, network and port.
		c |= driver.CapNetHosts | driver.CapUDP
	}
	return c
}

// Compile translates the policy once per sandbox (see the package documentation).
// It fails, naming the rule, when the policy needs something the provider cannot
// enforce here and that the caller did not accept.
func (p *Provider) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (any, error) {
	h := p.host()
	return prepare.Compile(h.err, func() (*compiled, error) { return compile(ctx, pol, accepted, h, &p.core.Interps) })
}

// Prepare makes the launch: the supervisor starts in new namespaces, builds the
// sandbox's root and starts the program in it with no capability, no_new_privs
// and the seccomp filter.
func (p *Provider) Prepare(ctx context.Context, req *driver.Request) (*driver.Launch, error) {
	return prepare.Prepare(ctx, Name, req, p, p.host().err, func(c *compiled, logger *slog.Logger) (*driver.Launch, error) {
		return c.launch(ctx, req, logger)
	})
}

// launch is the launch of one program under c.
func (c *compiled) launch(ctx context.Context, req *driver.Request, logger *slog.Logger) (*driver.Launch, error) {
	ops, err := c.rootOps(ctx, req.Path, logger)
	if err != nil {
		return nil, err
	}
	// The working directory: the same path in the sandbox's root ("/" when the
	// sandbox does not see it).
	ops = append(ops, supervise.RootOp{Kind: supervise.OpChdir, Path: prepare.RealWorkDir(req.Dir)})
	ready := c.net.ready()
	ns := &supervise.Namespaces{UID: c.uid, GID: c.gid, Loopback: true, Wait: ready != nil, Root: ops}
	var filters *hideview.Servers
	if len(c.served) > 0 {
		if filters, err = hideview.Start(c.served, hideview.Paths(c.exposes), c.ignores, hidefs.IDs{UID: uint32(c.uid), GID: uint32(c.gid)}, 0, logger); err != nil {
			return nil, err
		}
	}
	view := c.view(ops, filters)
	stages := []supervise.Stage{{Kind: supervise.StageNoNewPrivs}, {Kind: supervise.StageDropCapabilities}}
	if c.bind != nil {
		stages = append(stages, *c.bind)
	}
	if c.seccomp != nil {
		stages = append(stages, supervise.Stage{Kind: supervise.StageSeccomp, BPF: c.seccomp})
	}
	var viewFiles []*os.File
	if filters != nil {
		viewFiles = filters.Files()
	}
	l, err := launch.Supervised(req, launch.Options{Stages: stages, Namespaces: ns, View: view, ViewFiles: viewFiles, Ready: ready})
	if err != nil {
		filters.Stop(0)
		return nil, err
	}
	filters.Attach(l)
	return l, nil
}

// Details describes what the provider does on this host, one line each, for
// `pysandboxes probe`.
func (p *Provider) Details() []string {
	h := p.host()
	if h.err != nil {
		return []string{h.err.Error()}
	}
	out := []string{
		"namespaces: user (the sandbox's root is the caller's uid and gid, unshare.uid= and unshare.gid= as root), " +
			"mount, pid (the supervisor is pid 1: the sandbox dies with it), network (loopback only), IPC, UTS, cgroup; " +
			"no user namespace below (user.max_user_namespaces=0 inside)",
		"root: a read-only tmpfs holding bind mounts (nosuid, nodev) of the exposed directories (read-only or read-write) " +
			"and of what the program needs to run (read-only), the merged-/usr links, a new /proc, /dev with null, zero, " +
			"full, random, urandom and tty of the host and a private /dev/shm; no /sys, no host /run; /tmp only when the " +
			"policy exposes it (a private tmpfs unless unshare.host-tmp=yes); /etc/hosts with localhost when the policy " +
			"exposes none",
		"ignore=: the exposed directories the rules reach are served by a filter (FUSE, package hideview) that hides the ignored names at every lookup, for the life of the sandbox (files made or renamed there later included), and scans nothing; without it (unprivileged) " +
			"every ignored path present at start the sandbox would see (in the exposed directories, other hard links to an ignored " +
			"file, absolute patterns anywhere) is masked by an empty file or directory of mode 0 (reading it: EACCES)",
		"the program: no capability (empty bounding set), no_new_privs, resource limits",
	}
	if h.landlockABI >= landlockTCP {
		out = append(out, fmt.Sprintf("TCP binds: only on the ports of net= IN rules (a Landlock ruleset handling only the TCP bind right, ABI %d)", h.landlockABI))
	} else {
		out = append(out, "TCP binds: not restricted (no Landlock ABI 4 here): the program may listen on its own network, which nothing outside reaches")
	}
	if h.seccompErr != nil {
		out = append(out, "seccomp: unavailable ("+h.seccompErr.Error()+")")
	} else {
		out = append(out, "seccomp: refuses raw and packet sockets, MPTCP sockets, UDP sockets (unless a net= rule allows UDP), "+
			"ptrace, mount, namespaces, bpf, keyctl, io_uring and similar")
	}
	if h.netErr != nil {
		out = append(out, "network: loopback only; net= rules that let traffic out are refused: the network filter cannot work here ("+h.netErr.Error()+")")
	} else {
		out = append(out, "network: loopback only without a net= ALLOW rule; with one, the network filter (nftables in the sandbox's "+
			"network namespace, slirp4netns as the only way out, DNS only to the sandbox's resolver, pinned /etc/hosts) is set up "+
			"before the program starts")
	}
	if !h.unprivileged {
		out = append(out, "unprivileged users cannot make user namespaces here ("+userNamespaceLimits()+")")
	}
	for _, example := range []string{"/usr/bin/python3", "/bin/sh"} {
		if _, err := os.Stat(example); err != nil {
			continue
		}
		r := needs.Resolver{Interpreters: &p.core.Interps}
		ns, err := r.Needs(context.Background(), example)
		if err != nil {
			out = append(out, fmt.Sprintf("implicit binds for %s: %v", example, err))
			continue
		}
		var paths []string
		for _, n := range ns {
			paths = append(paths, n.String())
		}
		out = append(out, fmt.Sprintf("implicit read-only binds for %s (%d paths): %s", example, len(ns), strings.Join(paths, ", ")))
		break
	}
	return out
}
