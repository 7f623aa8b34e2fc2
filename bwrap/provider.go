package bwrap

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
)

func init() {
	driver.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "bwrap"

// probeTimeout bounds each run of bwrap made by the probe.
const probeTimeout = 10 * time.Second

// Provider is the bwrap provider. Importing the package registers one; its zero
// value is ready to use (with pysandboxes.UseProvider, for example).
type Provider struct {
	// Binary, when set, is the bwrap binary to use (default: bwrap on PATH).
	Binary string

	core wrapper.Core[hostState]
}

// hostState is what the provider found on this host.
type hostState struct {
	bwrap      string          // absolute path of the binary
	version    string          // "0.8.0"
	known      map[string]bool // the options its --help lists
	env        string          // the env(1) used to start the program ("" when missing)
	err        error           // why bwrap cannot run here
	seccompErr error           // nil when seccomp filters can be built
	netErr     error           // nil when net= rules can be filtered
	landlock   int             // the kernel's Landlock ABI (0: none)
	idmap      bool            // run as root: bwrap runs as hostid.UID, the exposed directories idmapped
	idErr      error           // why the program would hold a host identity (nil: it does not)
	hideErr    error           // why ignore= cannot hold over time here (nil: the filter serves the exposed directories)
}

var versionRE = regexp.MustCompile(`bubblewrap ([0-9][0-9.]*)`)

// help is what bwrap's --help must list.
var help = wrapper.Help{
	Option:   regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)`),
	Required: []string{"args", "seccomp", "info-fd", "die-with-parent", "disable-userns", "cap-drop", "clearenv", "setenv", "unshare-user"},
	Product:  "bubblewrap",
}

func (p *Provider) host() hostState {
	return p.core.Host(func() hostState { return probeHost(p.Binary) })
}

// core is what the shared steps (package internal/wrapper) read of the host.
func (h hostState) core() wrapper.Host {
	return wrapper.Host{
		Name:    Name,
		Binary:  h.bwrap,
		Env:     h.env,
		EnvAdds: "bwrap adds PWD to the program's environment",
		NetErr:  h.netErr,
		Listen:  h.landlock >= nsutil.ListenABI && h.seccompErr == nil,
		IDMap:   h.idmap,
		HideErr: h.hideErr,
	}
}

// probeHost finds bwrap, reads its version and options, and runs it once to check
// that it can create its namespaces here.
func probeHost(binary string) hostState {
	var h hostState
	h.seccompErr = seccomp.Available()
	h.landlock, _ = supervise.LandlockABI()
	binary, h.err = wrapper.Lookup(binary, "bwrap", "bwrap (bubblewrap) is not installed: install the bubblewrap package (apt-get install bubblewrap, dnf install bubblewrap, apk add bubblewrap)")
	if h.err != nil {
		return h
	}
	h.bwrap = binary
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	h.netErr = netfilter.Available(ctx)
	out, err := exec.CommandContext(ctx, binary, "--version").CombinedOutput()
	if err != nil {
		h.err = fmt.Errorf("%s --version failed: %v: %s", binary, err, strings.TrimSpace(string(out)))
		return h
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		h.err = fmt.Errorf("%s --version does not name a bubblewrap version: %q", binary, strings.TrimSpace(string(out)))
		return h
	}
	h.version = string(m[1])
	if !versionAtLeast(h.version, 0, 8) {
		h.err = fmt.Errorf("bubblewrap %s is too old: 0.8.0 or later is needed (--disable-userns, --args)", h.version)
		return h
	}
	if h.known, h.err = help.Options(ctx, binary, h.version); h.err != nil {
		return h
	}
	h.env = nsutil.Env()
	// One real run: the namespaces this provider always asks for.
	cmd := exec.CommandContext(ctx, binary, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
		"--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", binary, "--version")
	cmd.Env = []string{}
	if os.Geteuid() == 0 {
		// Run as root, bwrap runs as an unprivileged uid (see package
		// internal/hostid): the same run as that uid.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: hostid.UID, Gid: hostid.GID}}
		h.idErr = wrapper.Identity()
		h.idmap = h.idErr == nil
	}
	if !h.idmap && os.Geteuid() == 0 {
		cmd.SysProcAttr = nil
	}
	h.hideErr = wrapper.Hide(h.idmap, "the filter of ignore= paths is mounted by the host's root for a bwrap run as another uid")
	if out, err := cmd.CombinedOutput(); err != nil {
		h.err = fmt.Errorf("bwrap cannot create its namespaces here (%v: %s): user namespaces must be usable without privilege "+
			"(sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 where it exists, "+
			"kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu); in a container, run it with a seccomp profile "+
			"that allows clone(CLONE_NEWUSER) and mount (Docker: --security-opt seccomp=unconfined, or --privileged)",
			err, strings.TrimSpace(string(out)))
	}
	return h
}

// versionAtLeast compares a dotted version with major.minor.
func versionAtLeast(v string, major, minor int) bool {
	var a, b int
	fmt.Sscanf(v, "%d.%d", &a, &b)
	return a > major || (a == major && b >= minor)
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

// Compile translates the policy once per sandbox (see the package documentation).
// It fails, naming the rule, when the policy needs something this provider cannot
// enforce and that the caller did not accept.
func (p *Provider) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (any, error) {
	h := p.host()
	return wrapper.Compile(h.err, func() (*compiled, error) { return compile(ctx, pol, accepted, h, &p.core.Interps) })
}

// Prepare makes the launch: bwrap, started by the supervisor (resource limits,
// tree kill), with the arguments built from the policy and what this program
// needs to run.
func (p *Provider) Prepare(ctx context.Context, req *driver.Request) (*driver.Launch, error) {
	h := p.host()
	return wrapper.Prepare(ctx, Name, req, p, h.err, func(c *compiled, logger *slog.Logger) (*driver.Launch, error) {
		return c.prepare(ctx, req, h, logger)
	})
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
		"ignore=: the exposed directories the rules reach are served by a filter (FUSE, package hideview) that hides the ignored names at every lookup, for the life of the sandbox (files made or renamed there later included), and scans nothing; without it (unprivileged) " +
			"the ignored files present at start are replaced by an unreadable device node, directories by an empty unreadable tmpfs (hide not claimed)",
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
