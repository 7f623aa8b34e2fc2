package landlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hidefs"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/launch"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

func init() {
	driver.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "landlock"

// Provider is the landlock provider. Importing the package registers one; its zero
// value is ready to use (with UseProvider, for example).
type Provider struct {
	core prepare.Core[hostState]
}

// hostState is what the provider found on this host.
type hostState struct {
	abi        int   // 0 when Landlock is not available
	abiErr     error // why not
	seccompErr error // nil when seccomp filters can be built
	id         identityMode
	idErr      error // why the program would hold a host identity (id == idNone)
}

// identityMode is how the provider keeps the program from holding an identity
// of the host's (see package internal/hostid).
type identityMode int

const (
	// idNone: it does not (no C supervisor, or no seccomp filter).
	idNone identityMode = iota
	// idRoot: the host runs as root; the program runs as hostid.UID in a private
	// mount namespace where every mount is read-only, the exposed directories
	// (and the directories it could not traverse on the way) idmapped so that
	// the host's files there are its own.
	idRoot
	// idUserNS: the program keeps the caller's uid, in a user and mount
	// namespace of its own where every mount is read-only but the expose-rw
	// directories, and an IPC namespace of its own.
	idUserNS
	// idSeccomp: the program keeps the caller's uid without namespaces (user
	// namespaces are not available): the seccomp filter refuses every change of
	// metadata and the host's IPC objects.
	idSeccomp
)

func (m identityMode) String() string {
	return [...]string{"none", "root", "userns", "seccomp"}[m]
}

func (p *Provider) host() hostState {
	return p.core.Host(func() (h hostState) {
		h.abi, h.abiErr = detectABI()
		if h.abiErr == nil && h.abi < 1 {
			h.abiErr = errors.New("the kernel reports Landlock ABI 0")
		}
		if h.abiErr != nil {
			h.abi = 0
			h.abiErr = probeError(h.abiErr)
		}
		h.seccompErr = seccomp.Available()
		h.id, h.idErr = identity(h)
		return h
	})
}

// identity decides how the program holds no host identity here.
func identity(h hostState) (identityMode, error) {
	switch {
	case h.abi < 1:
		return idNone, h.abiErr
	case supervise.ViewAvailable() != nil:
		return idNone, supervise.ViewAvailable()
	case h.seccompErr != nil:
		return idNone, fmt.Errorf("without seccomp, the program may set limits and priorities of the host's processes of its uid: %w", h.seccompErr)
	case hostid.Root():
		return idRoot, nil
	case h.abi < abiScopes:
		return idNone, fmt.Errorf("with Landlock ABI %d (< %d), the program may signal the host's processes of its uid", h.abi, abiScopes)
	case hostid.UserNamespaces() == nil:
		return idUserNS, nil
	}
	return idSeccomp, nil
}

// Name returns "landlock".
func (p *Provider) Name() string { return Name }

// Probe reports whether Landlock works here (ABI 1 or later). It does not need
// seccomp: without it the provider works with fewer capabilities.
func (p *Provider) Probe(context.Context) error {
	return p.host().abiErr
}

// Capabilities is what the provider enforces on this host (see the package
// documentation for the table).
func (p *Provider) Capabilities() driver.Capability {
	h := p.host()
	c := capabilities(h.abi, h.seccompErr == nil, h.id)
	if c != 0 && h.id == idRoot && hideview.Available() == nil {
		// Run as root: the exposed directories ignore= rules reach are served by
		// the filter (package hideview), which hides the ignored paths at every
		// lookup, for the life of the sandbox.
		c |= driver.CapHide
	}
	return c
}

// Explain says why the provider lacks capabilities of missing on this host
// (driver.Explainer): a build or host without seccomp, an identity mode it
// cannot set up, a Landlock ABI too old, and what Landlock never sees.
func (p *Provider) Explain(missing driver.Capability) string {
	h := p.host()
	if h.abiErr != nil {
		return "" // the probe's error says it
	}
	var why []string
	explained := driver.Capability(0)
	if h.seccompErr != nil {
		// What a seccomp filter would add here.
		full := h
		full.seccompErr = nil
		full.id, _ = identity(full)
		lost := capabilities(full.abi, true, full.id) &^ capabilities(h.abi, false, h.id)
		if m := missing & lost; m != 0 {
			why = append(why, fmt.Sprintf("without seccomp (%v), it does not enforce %s", h.seccompErr, m))
			explained |= m
		}
	}
	if m := missing & (driver.CapIdentity | driver.CapFilesWrite) &^ explained; m != 0 && h.id == idNone && h.idErr != nil {
		why = append(why, fmt.Sprintf("it does not enforce %s: %v", m, h.idErr))
	}
	if m := missing & driver.CapTCPPorts &^ explained; m != 0 && h.abi < abiTCP {
		why = append(why, fmt.Sprintf("Landlock ABI %d has no network rights (TCP ports need ABI %d)", h.abi, abiTCP))
	}
	if m := missing & driver.CapSignals; m != 0 && h.abi < abiScopes {
		why = append(why, fmt.Sprintf("Landlock ABI %d does not scope signals (ABI %d does)", h.abi, abiScopes))
	}
	if missing.Has(driver.CapFilesMeta) {
		why = append(why, "Landlock mediates the contents of files, not their names and metadata: files-meta is never enforced (stat, readlink, xattrs, inotify work on any path)")
	}
	if missing.Has(driver.CapHide) {
		why = append(why, "hiding ignore= paths needs the FUSE filter, which needs the host to run as root")
	}
	return strings.Join(why, "; ")
}

// capabilities is what the provider enforces with Landlock ABI abi, with or
// without seccomp, and with an identity mode. Landlock mediates the contents of
// files, not their names and metadata (stat, readlink, xattrs, inotify work on
// any path): files-meta and hide are never claimed. files-write covers metadata
// only where the view makes the host's mounts read-only or seccomp refuses every
// metadata change (an identity mode).
func capabilities(abi int, seccompOK bool, id identityMode) driver.Capability {
	if abi < 1 {
		return 0
	}
	c := driver.CapEnv | driver.CapFilesRead |
		driver.CapResourceLimits | driver.CapUnprivileged | driver.CapNoPrivileges
	if id != idNone {
		c |= driver.CapIdentity | driver.CapFilesWrite
	}
	if abi >= abiScopes {
		// Signals by the ABI 6 scope; ptrace of a process outside the domain is
		// refused by Landlock from ABI 1 (and by seccomp).
		c |= driver.CapSignals
	}
	if seccompOK {
		c |= driver.CapSeccomp | driver.CapUDPDeny | driver.CapRawSockets | driver.CapUnixSockets
		if abi >= abiTCP {
			// MPTCP, which Landlock's TCP rules do not see, is refused by seccomp.
			c |= driver.CapTCPPorts
		}
	} else if abi >= abiUnix {
		// Named Unix sockets by RESOLVE_UNIX, abstract ones by the ABI 6 scope.
		c |= driver.CapUnixSockets
	}
	return c
}

// Compile translates the policy once per sandbox (see the package documentation).
// It fails, naming the rule, when the policy needs something Landlock (and seccomp)
// cannot enforce here and that the caller did not accept.
func (p *Provider) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (any, error) {
	h := p.host()
	return prepare.Compile(h.abiErr, func() (*compiled, error) { return compile(ctx, pol, accepted, h, &p.core.Interps) })
}

// Prepare makes the launch: the supervisor applies no-new-privs, the Landlock
// ruleset (the sandbox's grants plus what this program needs to run) and the
// seccomp filter to the thread that starts the program.
func (p *Provider) Prepare(ctx context.Context, req *driver.Request) (*driver.Launch, error) {
	return prepare.Prepare(ctx, Name, req, p, p.host().abiErr, func(c *compiled, logger *slog.Logger) (*driver.Launch, error) {
		return c.launch(ctx, req, logger)
	})
}

// launch is the launch of one program under c.
func (c *compiled) launch(ctx context.Context, req *driver.Request, logger *slog.Logger) (*driver.Launch, error) {
	cfg, err := c.rulesetFor(ctx, req.Path, logger)
	if err != nil {
		return nil, err
	}
	stages := []supervise.Stage{{Kind: supervise.StageNoNewPrivs}}
	var view *supervise.View
	var filters *hideview.Servers
	var viewFiles []*os.File
	switch c.id {
	case idRoot:
		if len(c.served) > 0 {
			if filters, err = hideview.Start(c.served, hideview.Paths(c.exposes), c.ignores, hidefs.IDs{UID: hostid.UID, GID: hostid.GID}, 0, logger); err != nil {
				return nil, err
			}
			viewFiles = filters.Files()
		}
		ops := hostid.Idmapped(c.exposes, grantedPaths(cfg), uint32(os.Geteuid()), uint32(os.Getegid()))
		view = &supervise.View{ReadOnly: true, IPC: true, UID: hostid.UID, GID: hostid.GID,
			Ops: filters.Into(hostid.Sorted(append(ops, shmWritable(c.exposes)...)))}
		stages = append(stages, supervise.Stage{Kind: supervise.StageSetIdentity, Identity: &supervise.Identity{UID: hostid.UID, GID: hostid.GID, DropBounding: true}})
	case idUserNS:
		view = &supervise.View{ReadOnly: true, UserNS: true, IPC: true, Ops: hostid.Writable(c.exposes)}
	}
	stages = append(stages,
		supervise.Stage{Kind: supervise.StageDropCapabilities},
		supervise.Stage{Kind: supervise.StageLandlock, Landlock: cfg})
	if c.seccomp != nil {
		stages = append(stages, supervise.Stage{Kind: supervise.StageSeccomp, BPF: c.seccomp})
	}
	l, err := launch.Supervised(req, launch.Options{Stages: stages, View: view, ViewFiles: viewFiles})
	if err != nil {
		filters.Stop(0)
		return nil, err
	}
	filters.Attach(l)
	return l, nil
}

// grantedPaths lists the paths of a ruleset (the paths the program must be able
// to reach).
func grantedPaths(cfg *supervise.LandlockConfig) []string {
	var out []string
	for _, g := range cfg.Paths {
		for _, list := range [][]string{g.Paths, g.Optional} {
			for _, p := range list {
				if g.Base != "" && !strings.HasPrefix(p, "/") {
					p = g.Base + "/" + p
				}
				out = append(out, p)
			}
		}
	}
	return out
}

// Details describes what the provider does on this host, one line each, for
// `pysandboxes probe`: the Landlock ABI and the rights it handles, the seccomp
// filter, and the implicit grants.
func (p *Provider) Details() []string {
	h := p.host()
	var out []string
	if h.abiErr != nil {
		return []string{h.abiErr.Error()}
	}
	r := rightsOf(h.abi)
	out = append(out, fmt.Sprintf("Landlock ABI %d: handles file rights %s", h.abi, rightNames(r.fs, fsNames)))
	if r.net != 0 {
		out = append(out, "network rights "+rightNames(r.net, netNames)+" (TCP is always handled: no net= rule means no TCP at all)")
	} else {
		out = append(out, fmt.Sprintf("no network rights (TCP needs ABI %d)", abiTCP))
	}
	if r.scoped != 0 {
		out = append(out, "scopes "+rightNames(r.scoped, scopeNames)+" (abstract Unix sockets and signals of processes outside)")
	} else {
		out = append(out, fmt.Sprintf("no scopes (abstract Unix sockets and signals need ABI %d)", abiScopes))
	}
	if h.seccompErr != nil {
		out = append(out, "seccomp: unavailable ("+h.seccompErr.Error()+"): TCP ports, UDP, raw sockets and Unix sockets are not enforced")
	} else {
		out = append(out, "seccomp: refuses UDP sockets (unless a net= rule allows UDP and the caller accepted udp), raw and packet sockets, "+
			"MPTCP sockets (they bypass Landlock's TCP rules), socket(AF_UNIX) (unless landlock.unix-sockets=allow), "+
			"ptrace, mount, namespaces, bpf, keyctl, io_uring and similar")
	}
	out = append(out, "implicit read-only grants: the program, its ELF loader and shared libraries, /etc/ld.so.cache, "+
		"the interpreter of a #! script (and the command of #!/usr/bin/env), a Python interpreter's standard library and site directories")
	out = append(out, "implicit read-write grants (no create, no delete): "+strings.Join(present(devicePaths), ", "))
	out = append(out, "implicit read-only grants when a net= rule allows traffic: "+strings.Join(present(networkPaths), ", "))
	out = append(out, "no implicit write anywhere: neither the working directory nor /tmp")
	switch h.id {
	case idRoot:
		out = append(out, fmt.Sprintf("identity: the program runs as uid %d, gid %d (the host runs as root), in a mount namespace "+
			"where every mount is read-only, the exposed directories idmapped (the host's files there are the program's) and "+
			"directories it could not traverse idmapped read-only; an IPC namespace of its own", hostid.UID, hostid.GID))
	case idUserNS:
		out = append(out, "identity: the program keeps the caller's uid, in a user, mount and IPC namespace of its own where "+
			"every mount is read-only but the expose-rw directories")
	case idSeccomp:
		out = append(out, "identity: the program keeps the caller's uid (no user namespaces here); seccomp refuses every "+
			"change of metadata (chmod, chown, utime, xattrs) and the host's System V IPC and message queues")
	default:
		out = append(out, "identity: NOT enforced: "+h.idErr.Error())
	}
	out = append(out, "not enforced by Landlock: names and metadata of paths outside the exposed directories "+
		"(stat, readlink, xattrs, inotify): files-meta is not claimed")
	if h.id == idRoot && hideview.Available() == nil {
		out = append(out, "ignore=: the exposed directories the rules reach are served by a filter (FUSE, package hideview) "+
			"that hides the ignored names at every lookup, for the life of the sandbox")
	} else {
		out = append(out, "ignore=: the exposed directories are granted entry by entry around the ignored paths present at "+
			"start (their contents unreadable, their names visible): hide is not claimed (the filter needs root)")
	}
	for _, example := range []string{"/usr/bin/python3", "/bin/sh"} {
		if _, err := os.Stat(example); err != nil {
			continue
		}
		r := needs.Resolver{Interpreters: &p.core.Interps}
		ns, err := r.Needs(context.Background(), example)
		if err != nil {
			out = append(out, fmt.Sprintf("implicit grants for %s: %v", example, err))
			continue
		}
		out = append(out, fmt.Sprintf("implicit grants for %s (%d paths):", example, len(ns)))
		for _, n := range ns {
			out = append(out, "  "+n.String())
		}
		break
	}
	return out
}

// present returns the paths that exist.
func present(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// shmWritable returns the view operations that keep an expose-rw directory of
// /dev/shm (POSIX shared memory and semaphores) writable in a read-only view:
// it cannot be idmapped (a kernel file system the sandboxing tools set up), and
// its mode (1777) lets any uid make its files there.
func shmWritable(exposes []policy.Expose) []supervise.ViewOp {
	var ops []supervise.ViewOp
	for _, e := range exposes {
		if e.Mode != policy.ReadWrite || (e.Path != "/dev/shm" && !strings.HasPrefix(e.Path, "/dev/shm/")) {
			continue
		}
		if _, err := os.Lstat(e.Path); err == nil {
			ops = append(ops, supervise.ViewOp{Kind: supervise.ViewBind, Path: e.Path})
		}
	}
	return ops
}
