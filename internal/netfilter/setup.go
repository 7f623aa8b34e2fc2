package netfilter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/internal/systool"
	"github.com/pysandboxes/pysandboxes/policy"
)

// ErrUnprivileged reports that this process cannot set the filter up: it lacks
// CAP_SYS_ADMIN and CAP_NET_ADMIN (root), and the unprivileged way is closed too
// (no user namespace of the sandbox given, or a binary built without cgo). The
// error that wraps it says which. A provider refuses the policy's net= rules with
// it rather than run the sandbox unfiltered.
var ErrUnprivileged = errors.New("the network filter cannot be set up without privileges here")

// Namespace names the sandbox's namespaces.
type Namespace struct {
	// Net is the path of the sandbox's network namespace, e.g. /proc/PID/ns/net or
	// /run/netns/NAME. "" means /proc/PID/ns/net.
	Net string
	// User is the path of the user namespace owning it; "" = the initial one.
	User string
	// PID is a process inside the namespaces when known (0 otherwise).
	PID int
}

// Session is the filter installed in one namespace and its egress stack. Close
// it when the sandbox ended.
type Session struct {
	once sync.Once
	err  error
	nsFD int
	path string
	user string // the sandbox's user namespace, when set up through the helper
	// userFD holds the user namespace that owns the network namespace (s.user
	// names it through /proc/PID/fd) while the session lasts; -1 when none.
	userFD int
	table  bool // the table was (or may have been) installed
	// keepTable: Close leaves the table to the namespace, which ends with its
	// processes (a /proc/PID path); removing it would only cost RCU grace periods.
	keepTable bool
	slirp     *slirp
}

// Setup brings lo up, installs the filter in the namespace, starts the egress
// stack when Egress(), sets up host-loopback forwards for IN rules that ask for
// them, and returns once everything is in place (the caller releases the program
// only after). On error nothing is left behind, and the program must not start.
//
// The namespace must be a fresh one (lo as its only interface) and not the
// host's. The program must not hold CAP_NET_ADMIN in the namespace's user
// namespace (it could remove the filter): providers drop every capability.
//
// As root (CAP_SYS_ADMIN and CAP_NET_ADMIN), Setup works from a locked thread of
// this process. Without privileges it needs ns.User, the sandbox's user namespace
// (owned by this process's user), and re-executes this binary as a helper that
// joins it (see docs/network.md); otherwise it fails with ErrUnprivileged.
func (f *Filter) Setup(ctx context.Context, ns Namespace) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := ns.Net
	if path == "" {
		if ns.PID <= 0 {
			return nil, errors.New("netfilter: Setup: no network namespace given (Namespace.Net or Namespace.PID)")
		}
		path = "/proc/" + strconv.Itoa(ns.PID) + "/ns/net"
	}
	priv := privileged()
	if !priv {
		if err := unprivilegedWay(ns.User); err != nil {
			return nil, fmt.Errorf("netfilter: setting up %s: %w", path, err)
		}
	}
	fd, err := openNetNS(path)
	if err != nil {
		return nil, fmt.Errorf("netfilter: %w", err)
	}
	s := &Session{nsFD: fd, path: path, userFD: -1}
	if !priv {
		s.user = ns.User
		// The user namespace to join is the one that owns the network
		// namespace: a sandbox may run in a user namespace nested in it (bwrap's
		// --disable-userns does that), where joining gives no power over the
		// network namespace.
		if owner, err := unix.IoctlRetInt(fd, unix.NS_GET_USERNS); err == nil {
			s.userFD = owner
			s.user = "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(owner)
		}
	}
	fail := func(err error) (*Session, error) {
		s.Close() // removes the table, whatever the namespace
		return nil, fmt.Errorf("netfilter: network namespace %s: %w", path, err)
	}
	routeLocalnet := f.hostLoop || len(f.forwards) > 0
	if priv {
		err = inNetNS(fd, func() error { return prepareHere(f.egress, routeLocalnet) })
	} else {
		// One run of the helper checks, prepares and installs the table.
		s.table = f.egress
		err = runHelper(ctx, s.user, path, helperJob{Op: "setup", Egress: f.egress, RouteLocalnet: routeLocalnet, Chains: f.rs.wire()})
	}
	if err != nil {
		return fail(err)
	}
	if !f.egress {
		return s, nil
	}
	// As root, the table and the egress stack are set up side by side
	// (slirp4netns spends most of its start in its own dynamic loading): the
	// program is held until both are in place, so their order does not matter.
	type started struct {
		sl  *slirp
		err error
	}
	sc := make(chan started, 1)
	go func() {
		cfg := slirpConfig{netns: path, root: priv, hostLoop: f.hostLoop, api: len(f.forwards) > 0}
		if !priv {
			cfg.userns = s.user
		}
		sl, err := startSlirp(ctx, cfg)
		sc <- started{sl, err}
	}()
	var ierr error
	if priv {
		s.table = true
		ierr = f.rs.install(fd)
	}
	st := <-sc
	s.slirp = st.sl
	if ierr != nil {
		return fail(ierr)
	}
	if st.err != nil {
		return fail(st.err)
	}
	for _, fw := range f.forwards {
		if err := st.sl.forward(ctx, fw); err != nil {
			if portInUse(fw) {
				err = fmt.Errorf("the port is in use on the host (%w)", err)
			}
			return fail(fmt.Errorf("forwarding the host's 127.0.0.1:%d (%s) into the sandbox, for %s: %s: %w",
				fw.Port, fw.Proto, fw.Rule.Ref, fw.Rule.Raw, err))
		}
	}
	st.sl.closeAPI()
	s.keepTable = strings.HasPrefix(path, "/proc/")
	return s, nil
}

// unprivilegedWay returns nil when Setup can work without privileges for a
// sandbox whose user namespace is user, and an error wrapping ErrUnprivileged
// otherwise.
func unprivilegedWay(user string) error {
	switch {
	case !helperBuilt:
		return fmt.Errorf("%w: this process lacks CAP_SYS_ADMIN and CAP_NET_ADMIN (run as root), and it was built without cgo, which joining the sandbox's user namespace needs", ErrUnprivileged)
	case user == "":
		return fmt.Errorf("%w: this process lacks CAP_SYS_ADMIN and CAP_NET_ADMIN (run as root), and no user namespace of the sandbox was given (Namespace.User) to join instead", ErrUnprivileged)
	}
	return nil
}

// portInUse reports whether the host's 127.0.0.1 port of fw is taken.
func portInUse(fw Forward) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(fw.Port)))
	var err error
	if fw.Proto == policy.UDP {
		var c net.PacketConn
		if c, err = net.ListenPacket("udp4", addr); err == nil {
			c.Close()
		}
	} else {
		var l net.Listener
		if l, err = net.Listen("tcp4", addr); err == nil {
			l.Close()
		}
	}
	return errors.Is(err, unix.EADDRINUSE)
}

// Close stops the egress stack (its forwards with it: the sandbox has no way out
// any more, only lo) and releases the namespace. It removes the filter's table
// from a persistent namespace (a /run/netns/NAME path); the namespace of a process
// (a /proc/PID path) ends with its processes, table included, so the table is left
// to it (removing it only costs time). Close is idempotent; later calls return
// the first call's result.
func (s *Session) Close() error {
	s.once.Do(func() {
		var errs []error
		if s.slirp != nil {
			errs = append(errs, s.slirp.stop())
		}
		if s.table && !s.keepTable {
			if s.user == "" {
				errs = append(errs, removeTable(s.nsFD))
			} else if _, err := os.Stat(s.path); err == nil {
				errs = append(errs, runHelper(context.Background(), s.user, s.path, helperJob{Op: "remove"}))
			}
		}
		if s.nsFD >= 0 {
			unix.Close(s.nsFD)
			s.nsFD = -1
		}
		if s.userFD >= 0 {
			unix.Close(s.userFD)
			s.userFD = -1
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// Available reports whether Setup can work here: the privileges to join a
// sandbox's network namespace (root) or the unprivileged way (user namespaces and
// a cgo build), nftables in the kernel, /dev/net/tun and slirp4netns. The error
// says what is missing (wrapping ErrUnprivileged when it is the privileges).
// slirp4netns, and the sleep the unprivileged probe runs, are looked for in
// the system's directories before PATH (package systool).
func Available(ctx context.Context) error { return available(ctx, systool.Finder{}) }

// available is Available with the host tools found by tools.
func available(ctx context.Context, tools systool.Finder) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error
	if _, err := lookSlirp(tools); err != nil {
		errs = append(errs, err)
	}
	if st, err := os.Stat("/dev/net/tun"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		errs = append(errs, errors.New("/dev/net/tun is missing (the kernel needs CONFIG_TUN)"))
	} else if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		// slirp4netns opens it with the caller's identity: machines differ
		// (crw------- root on some).
		errs = append(errs, fmt.Errorf("this user cannot open /dev/net/tun (%v; its mode is %v): slirp4netns needs it", err, st.Mode().Perm()))
	} else {
		f.Close()
	}
	if privileged() {
		fd, err := inNewNetNS(nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot create a network namespace: %w", err))
		} else {
			probe := probeRuleset()
			if err := probe.install(fd); err != nil {
				errs = append(errs, fmt.Errorf("nftables does not work here: %w", err))
			}
			unix.Close(fd)
		}
	} else if err := unprivilegedWay("probe"); err != nil {
		errs = append(errs, err)
	} else if err := probeUnprivileged(ctx, tools); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("netfilter: %w", errors.Join(errs...))
	}
	return nil
}

// probeUnprivileged tries the unprivileged way for real: a process in new user and
// network namespaces (sleep, found by tools), and the helper installing a table
// there.
func probeUnprivileged(ctx context.Context, tools systool.Finder) error {
	sleep, err := tools.Find("sleep", "")
	if err != nil {
		return fmt.Errorf("probing the unprivileged way: %w", err)
	}
	cmd := exec.CommandContext(ctx, sleep, "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: this process lacks CAP_SYS_ADMIN and CAP_NET_ADMIN, and it cannot create user and network namespaces: %v", ErrUnprivileged, err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := strconv.Itoa(cmd.Process.Pid)
	if err := runHelper(ctx, "/proc/"+pid+"/ns/user", "/proc/"+pid+"/ns/net", helperJob{Op: "probe"}); err != nil {
		return fmt.Errorf("nftables does not work in an unprivileged sandbox here: %w", err)
	}
	return nil
}
