package firejail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
)

// probeTimeout bounds each run of firejail made by the probe.
const probeTimeout = 20 * time.Second

// hostState is what the provider found on this host.
type hostState struct {
	firejail string          // absolute path of the binary
	version  string          // "0.9.72"
	known    map[string]bool // the options its --help lists
	syscalls map[string]bool // the system calls its seccomp filter knows
	env      string          // the env(1) that starts the program ("" when missing)
	err      error           // why firejail cannot run here
	netErr   error           // nil when net= rules can be filtered
	// listen: Landlock's TCP bind rules can be applied to firejail (the kernel
	// offers ABI 4 or later, and firejail runs as root, which needs no
	// no_new_privs to be restricted).
	listen bool
	// idmap: run as root, firejail runs for hostid.UID (an account for it in the
	// supervisor's view), the exposed directories idmapped.
	idmap bool
	idErr error // why the program would hold a host identity (nil: it does not)
	// hideErr: why ignore= cannot hold over time here (nil: the filter serves
	// the exposed directories).
	hideErr error
}

var versionRE = regexp.MustCompile(`firejail version ([0-9][0-9.]*)`)

// help is what firejail's --help must list: the options the provider relies on.
var help = wrapper.Help{
	Option: regexp.MustCompile(`(?m)^\s+--([a-z0-9.-]+)`),
	Required: []string{"quiet", "noprofile", "caps.drop", "nonewprivs", "seccomp", "seccomp.block-secondary",
		"restrict-namespaces", "protocol", "net", "netns", "hosts-file", "dns", "private-dev", "whitelist", "blacklist",
		"read-only", "read-write", "keep-fd", "private-cwd"},
	Product: "firejail",
	Hint:    ": firejail 0.9.72 or later is needed",
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
		EnvAdds: "firejail adds variables to the program's environment",
		NetErr:  h.netErr,
		Listen:  h.listen,
		IDMap:   h.idmap,
		HideErr: h.hideErr,
	}
}

// probeHost finds firejail, checks that this user may run it, and runs it once to
// check that it really isolates a program here.
func probeHost(binary string, tools systool.Finder) hostState {
	var h hostState
	abi, _ := supervise.LandlockABI()
	h.listen = abi >= nsutil.ListenABI && os.Geteuid() == 0
	binary, h.err = wrapper.Lookup(tools, binary, "firejail", "firejail is not installed: install the firejail package (apt-get install firejail, dnf install firejail)")
	if h.err != nil {
		if !errors.Is(h.err, systool.ErrNotFound) {
			return h
		}
		if err := notExecutable(tools.Dirs()); err != nil {
			h.err = err
		}
		return h
	}
	h.firejail = binary
	st, err := os.Stat(binary)
	if err != nil {
		h.err = fmt.Errorf("firejail: %w", err)
		return h
	}
	if os.Geteuid() != 0 {
		sys, _ := st.Sys().(*syscall.Stat_t)
		if st.Mode()&os.ModeSetuid == 0 || sys == nil || sys.Uid != 0 {
			h.err = fmt.Errorf("%s is not setuid root, and this process is not root (uid %d): firejail needs one or the other", binary, os.Geteuid())
			return h
		}
		if err := checkUser(); err != nil {
			h.err = err
			return h
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	h.netErr = netfilter.Available(ctx)
	out, err := exec.CommandContext(ctx, binary, "--version").CombinedOutput()
	m := versionRE.FindSubmatch(out)
	if err != nil || m == nil {
		h.err = fmt.Errorf("%s --version does not name a firejail version (%v): %q", binary, err, strings.TrimSpace(string(out)))
		return h
	}
	h.version = string(m[1])
	if h.known, h.err = help.Options(ctx, binary, h.version); h.err != nil {
		return h
	}
	sc, _ := exec.CommandContext(ctx, binary, "--debug-syscalls").Output()
	h.syscalls = map[string]bool{}
	for _, line := range strings.Split(string(sc), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "-" {
			h.syscalls[f[2]] = true
		}
	}
	h.env = nsutil.Env()
	// One real run: firejail must isolate the program (a pid namespace). In a
	// container firejail may decide it is already sandboxed and run the program
	// without any isolation.
	cmd := exec.CommandContext(ctx, binary, "--quiet", "--noprofile", "--net=none", "--private-dev",
		"--caps.drop=all", "--nonewprivs", "--seccomp", "--", "/bin/sh", "-c", "echo $$")
	cmd.Env = []string{}
	out, err = cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		name, uid := currentUser()
		if h.err = refusal(stderr, name, uid); h.err != nil {
			return h
		}
		h.err = fmt.Errorf("firejail cannot start a sandbox here (%v: %s): it needs to be root or setuid root, "+
			"the user listed in /etc/firejail/firejail.users when that file exists, and namespaces it may create "+
			"(it does not work in an unprivileged container)", err, stderr)
		return h
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if perr != nil || pid > 64 {
		h.err = fmt.Errorf("firejail did not isolate the program here (its pid is %q, not one of a new pid namespace): "+
			"inside a container firejail may detect an existing sandbox and run programs without one", strings.TrimSpace(string(out)))
		return h
	}
	if os.Geteuid() == 0 {
		h.idErr = idTrial(ctx, binary)
		h.idmap = h.idErr == nil
	}
	h.hideErr = wrapper.Hide(h.idmap, "the filter of ignore= paths is mounted by the host's root for a firejail run for another uid")
	return h
}

// idTrial runs firejail once as the unprivileged uid the program runs as when
// the host is root (see package internal/hostid): nil when it works.
func idTrial(ctx context.Context, binary string) error {
	if err := wrapper.Identity(); err != nil {
		return err
	}
	view, err := accountView(nil)
	if err != nil {
		return err
	}
	spec := supervise.Spec{Path: binary, Args: []string{"firejail", "--quiet", "--noprofile", "--net=none", "--private-dev",
		"--caps.drop=all", "--nonewprivs", "--seccomp", "--", "/bin/sh", "-c", "id -u"},
		View: view, Stages: []supervise.Stage{wrapper.IdentityStage()}}
	cmd, hd, err := supervise.Command(spec, "", []string{}, "/", nil)
	if err != nil {
		return err
	}
	defer hd.Close()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if _, err := hd.Start(ctx, cmd); err != nil {
		cmd.Wait()
		return fmt.Errorf("firejail cannot run for uid %d here: %w", hostid.UID, err)
	}
	cmd.Wait()
	ws, err := hd.Status()
	if err == nil && (ws.ExitStatus() != 0 || strings.TrimSpace(out.String()) != strconv.Itoa(hostid.UID)) {
		err = fmt.Errorf("exit status %d: %s", ws.ExitStatus(), strings.TrimSpace(errb.String()+out.String()))
	}
	if err != nil {
		return fmt.Errorf("firejail cannot run for uid %d here (/etc/firejail/firejail.users must list it when it exists): %w", hostid.UID, err)
	}
	return nil
}

// accountView is the view firejail runs in as the unprivileged uid: an account
// for it (firejail refuses a uid without one), and ops.
func accountView(ops []supervise.ViewOp) (*supervise.View, error) {
	passwd, group, err := hostid.Account()
	if err != nil {
		return nil, fmt.Errorf("an account for uid %d: %w", hostid.UID, err)
	}
	ops = append(ops, supervise.ViewOp{Kind: supervise.ViewFile, Path: "/etc/passwd", Data: passwd},
		supervise.ViewOp{Kind: supervise.ViewFile, Path: "/etc/group", Data: group})
	return &supervise.View{UID: hostid.UID, GID: hostid.GID, Ops: ops}, nil
}
