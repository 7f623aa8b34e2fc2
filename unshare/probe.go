package unshare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/hostid"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// hostState is what the provider found on this host.
type hostState struct {
	err          error // why the provider cannot run here (nil: it can)
	seccompErr   error // nil when seccomp filters can be built
	netErr       error // nil when the network filter works here
	landlockABI  int   // the kernel's Landlock ABI (TCP bind from 4)
	unprivileged bool  // an unprivileged user could run it here too
	idmap        bool  // run as root: the sandbox's root is hostid.UID, the exposed directories idmapped
	idErr        error // why the sandbox's root would hold a host identity (nil: it does not)
	hideErr      error // why ignore= cannot hold over time here (nil: the filter serves the exposed directories)
}

// namespaceFiles are the namespaces the sandbox needs, with the kernel option
// that provides each.
var namespaceFiles = []struct{ file, config string }{
	{"user", "CONFIG_USER_NS"}, {"mnt", "the mount namespace"}, {"pid", "CONFIG_PID_NS"},
	{"net", "CONFIG_NET_NS"}, {"ipc", "CONFIG_IPC_NS"}, {"uts", "CONFIG_UTS_NS"}, {"cgroup", "CONFIG_CGROUPS"},
}

// sysctl reads a sysctl as an integer; ok is false when it does not exist.
func sysctl(name string) (int, bool) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return 0, false
	}
	var v int
	if _, err := fmt.Sscan(string(b), &v); err != nil {
		return 0, false
	}
	return v, true
}

// userNamespaceLimits reports what keeps an unprivileged user from making user
// namespaces here ("" when nothing does).
func userNamespaceLimits() string { return userNamespaceLimitsOf(sysctl) }

// userNamespaceLimitsOf is userNamespaceLimits with the sysctls read by sysctl.
func userNamespaceLimitsOf(sysctl func(string) (int, bool)) string {
	var why []string
	if v, ok := sysctl("kernel.unprivileged_userns_clone"); ok && v == 0 {
		why = append(why, "kernel.unprivileged_userns_clone=0 (set it to 1: sysctl -w kernel.unprivileged_userns_clone=1)")
	}
	if v, ok := sysctl("user.max_user_namespaces"); ok && v == 0 {
		why = append(why, "user.max_user_namespaces=0 (set it above 0: sysctl -w user.max_user_namespaces=10000)")
	}
	if v, ok := sysctl("kernel.apparmor_restrict_unprivileged_userns"); ok && v != 0 {
		why = append(why, "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1: "+
			"set it to 0, or give the program an AppArmor profile that allows userns)")
	}
	return strings.Join(why, "; ")
}

// probeHost finds out whether the provider works here: the kernel's namespaces,
// the sysctls that restrict user namespaces, then a real trial: a supervisor
// started in the namespaces builds a small root (tmpfs, a bind mount of
// /dev/null, a new procfs, pivot_root) and reports that it is ready.
func probeHost(ctx context.Context) hostState {
	var h hostState
	h.seccompErr = seccomp.Available()
	h.netErr = errNoFilter
	for _, ns := range namespaceFiles {
		if _, err := os.Lstat("/proc/self/ns/" + ns.file); err != nil {
			h.err = fmt.Errorf("this kernel has no %s namespaces (/proc/self/ns/%s: %v): it needs %s", ns.file, ns.file, err, ns.config)
			return h
		}
	}
	limits := userNamespaceLimits()
	if os.Geteuid() != 0 && limits != "" {
		h.err = fmt.Errorf("user namespaces are not available to this user: %s; or run as root", limits)
		return h
	}
	if v, ok := sysctl("user.max_user_namespaces"); ok && v == 0 {
		h.err = errors.New("user namespaces are disabled: user.max_user_namespaces=0 (set it above 0: sysctl -w user.max_user_namespaces=10000)")
		return h
	}
	if err := trial(ctx, nil); err != nil {
		h.err = fmt.Errorf("cannot set up a sandbox here: %w%s", err, trialHint(err))
		return h
	}
	if os.Geteuid() == 0 {
		switch {
		case supervise.ViewAvailable() != nil:
			h.idErr = fmt.Errorf("run as root, the sandbox's root would be the host's root: %w", supervise.ViewAvailable())
		case !hostid.Root():
			h.idErr = errors.New("run as root outside the initial user namespace, the sandbox's root would be this root")
		default:
			// The sandbox's root as an unprivileged uid, with an idmapped directory.
			view := &supervise.View{UID: hostid.UID, GID: hostid.GID, Ops: hostid.Idmapped(
				[]policy.Expose{{Path: os.TempDir(), Mode: policy.ReadWrite}}, nil, 0, 0)}
			if err := trial(ctx, view); err != nil {
				h.idErr = fmt.Errorf("run as root, the sandbox's root cannot be another uid here (idmapped mounts): %w", err)
			} else {
				h.idmap = true
			}
		}
	}
	h.hideErr = hideview.Available()
	if h.hideErr == nil && !h.idmap {
		h.hideErr = errors.New("the filter of ignore= paths is mounted by the host's root for a sandbox whose root is another uid")
	}
	h.unprivileged = os.Geteuid() != 0 || limits == ""
	h.netErr = netfilter.Available(ctx)
	h.landlockABI = landlockABI()
	return h
}

// trial starts a supervisor in the sandbox's namespaces with a small root, waits
// until it reports that everything is ready, and lets it go without starting
// anything.
func trial(ctx context.Context, view *supervise.View) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	uid, gid := os.Geteuid(), os.Getegid()
	if view != nil {
		uid, gid = int(view.UID), int(view.GID)
	}
	ns := &supervise.Namespaces{UID: uid, GID: gid, Wait: true, Loopback: true, Root: []supervise.RootOp{
		{Kind: supervise.OpDir, Path: "/dev", Mode: 0o755},
		{Kind: supervise.OpBind, Path: "/dev/null", Source: "/dev/null",
			Flags: supervise.RootReadOnly | supervise.RootDevices | supervise.RootFile | supervise.RootNoExec},
		{Kind: supervise.OpProc, Path: "/proc"},
		{Kind: supervise.OpTmpfs, Path: "/tmp", Mode: 0o1777, Size: 1 << 20},
		{Kind: supervise.OpMask, Path: "/tmp", Mode: 0o111},
		{Kind: supervise.OpSeal, Path: "/tmp"},
	}}
	cmd, h, err := supervise.Command(supervise.Spec{Path: "/", Args: []string{"probe"}, Namespaces: ns, View: view}, "", nil, "/", nil)
	if err != nil {
		return err
	}
	defer h.Close()
	_, err = h.StartReady(ctx, cmd, func(context.Context, int) error { return errProbeDone })
	if cmd.Process != nil {
		h.Close() // the lifeline ends: the supervisor exits
		cmd.Wait()
	}
	if errors.Is(err, errProbeDone) {
		return nil
	}
	if err == nil {
		err = errors.New("the supervisor did not wait for the go-ahead")
	}
	return err
}

var errProbeDone = errors.New("probe done")

// trialHint adds what usually explains a failed trial.
func trialHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "operation not permitted") && (inContainer() || strings.Contains(msg, "proc")):
		return " (inside a container, mounting a new procfs and making user namespaces usually needs a privileged " +
			"container: Docker/Podman --privileged, or a seccomp and AppArmor profile that allows unshare and mount " +
			"with a /proc that no mount covers)"
	case strings.Contains(msg, "function not implemented"):
		return " (the new mount API, Linux 5.12 or later, is needed)"
	case strings.Contains(msg, "no space left on device"):
		return " (the user namespace limit is reached: user.max_user_namespaces)"
	}
	return ""
}

// inContainer reports the usual marks of a container.
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}
