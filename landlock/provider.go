package landlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
)

func init() {
	pysandboxes.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "landlock"

// Provider is the landlock provider. Importing the package registers one; its zero
// value is ready to use (with UseProvider, for example).
type Provider struct {
	once  sync.Once
	state hostState
	// interps caches the Python interpreters' directories for every sandbox.
	interps needs.Interpreters
}

// hostState is what the provider found on this host.
type hostState struct {
	abi        int   // 0 when Landlock is not available
	abiErr     error // why not
	seccompErr error // nil when seccomp filters can be built
}

func (p *Provider) host() hostState {
	p.once.Do(func() {
		p.state.abi, p.state.abiErr = detectABI()
		if p.state.abiErr == nil && p.state.abi < 1 {
			p.state.abiErr = errors.New("the kernel reports Landlock ABI 0")
		}
		if p.state.abiErr != nil {
			p.state.abi = 0
			p.state.abiErr = probeError(p.state.abiErr)
		}
		p.state.seccompErr = seccomp.Available()
	})
	return p.state
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
func (p *Provider) Capabilities() pysandboxes.Capability {
	h := p.host()
	return capabilities(h.abi, h.seccompErr == nil)
}

// capabilities is what the provider enforces with Landlock ABI abi, and with or
// without seccomp.
func capabilities(abi int, seccompOK bool) pysandboxes.Capability {
	if abi < 1 {
		return 0
	}
	c := pysandboxes.CapEnv | pysandboxes.CapFilesRead | pysandboxes.CapFilesWrite | pysandboxes.CapHide |
		pysandboxes.CapResourceLimits | pysandboxes.CapUnprivileged | pysandboxes.CapNoPrivileges
	if abi >= abiScopes {
		// Signals by the ABI 6 scope; ptrace of a process outside the domain is
		// refused by Landlock from ABI 1 (and by seccomp).
		c |= pysandboxes.CapSignals
	}
	if seccompOK {
		c |= pysandboxes.CapSeccomp | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets | pysandboxes.CapUnixSockets
		if abi >= abiTCP {
			// MPTCP, which Landlock's TCP rules do not see, is refused by seccomp.
			c |= pysandboxes.CapTCPPorts
		}
	} else if abi >= abiUnix {
		// Named Unix sockets by RESOLVE_UNIX, abstract ones by the ABI 6 scope.
		c |= pysandboxes.CapUnixSockets
	}
	return c
}

// Compile translates the policy once per sandbox (see the package documentation).
// It fails, naming the rule, when the policy needs something Landlock (and seccomp)
// cannot enforce here and that the caller did not accept.
func (p *Provider) Compile(ctx context.Context, pol pysandboxes.Policy, accepted pysandboxes.Capability) (any, error) {
	h := p.host()
	if h.abiErr != nil {
		return nil, h.abiErr
	}
	c, err := compile(ctx, pol, accepted, h)
	if err != nil {
		return nil, err
	}
	c.resolver.Interpreters = &p.interps
	return c, nil
}

// Prepare makes the launch: the supervisor applies no-new-privs, the Landlock
// ruleset (the sandbox's grants plus what this program needs to run) and the
// seccomp filter to the thread that starts the program.
func (p *Provider) Prepare(ctx context.Context, req *pysandboxes.Request) (*pysandboxes.Launch, error) {
	c, _ := req.Compiled.(*compiled)
	if c == nil {
		// Not made by New (a caller of the Provider interface alone): compile now,
		// accepting nothing.
		h := p.host()
		if h.abiErr != nil {
			return nil, h.abiErr
		}
		var err error
		if c, err = compile(ctx, req.Policy, 0, h); err != nil {
			return nil, err
		}
		c.resolver.Interpreters = &p.interps
	}
	logger := req.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c.warnOnce.Do(func() {
		for _, w := range c.warnings {
			logger.Warn("os-sandbox landlock: "+w, "provider", Name)
		}
	})
	cfg, err := c.rulesetFor(ctx, req.Path, logger)
	if err != nil {
		return nil, err
	}
	llJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	stages := []supervise.Stage{
		{Kind: supervise.StageNoNewPrivs},
		{Kind: supervise.StageDropCapabilities},
		{Kind: supervise.StageLandlock, Config: llJSON},
	}
	if c.seccomp != nil {
		stages = append(stages, supervise.Stage{Kind: supervise.StageSeccomp, Config: c.seccomp})
	}
	return pysandboxes.SupervisedLaunch(req, stages)
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
	for _, example := range []string{"/usr/bin/python3", "/bin/sh"} {
		if _, err := os.Stat(example); err != nil {
			continue
		}
		r := needs.Resolver{Interpreters: &p.interps}
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
