package bwrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
)

// probeTimeout bounds each run of bwrap made by the probe.
const probeTimeout = 10 * time.Second

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

// host returns what the probe found here (probed at the first call).
func (p *Provider) host() hostState {
	return p.core.Host(func() hostState { return probeHost(p.Binary, p.tools) })
}

// core is what the shared steps (package internal/wrapper) read of the host.
func (h hostState) core() wrapper.Host {
	return wrapper.Host{
		Name:    Name,
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
func probeHost(binary string, tools systool.Finder) hostState {
	var h hostState
	h.seccompErr = seccomp.Available()
	h.landlock, _ = supervise.LandlockABI()
	binary, h.err = wrapper.Lookup(tools, binary, "bwrap", "bwrap (bubblewrap) is not installed: install the bubblewrap package (apt-get install bubblewrap, dnf install bubblewrap, apk add bubblewrap)")
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
		h.idErr = wrapper.Identity()
		h.idmap = h.idErr == nil
	}
	if h.idmap {
		// Run as root, bwrap runs as an unprivileged uid (see package
		// internal/hostid): the same run as that uid.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: hostid.UID, Gid: hostid.GID}}
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
