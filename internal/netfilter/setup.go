package netfilter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/policy"
)

// ErrUnprivileged reports a host process that cannot join the sandbox's network
// namespace to install the filter: it lacks CAP_SYS_ADMIN and CAP_NET_ADMIN (run
// as root). A provider refuses the policy's net= rules with it rather than run the
// sandbox unfiltered.
var ErrUnprivileged = errors.New("the network filter needs CAP_SYS_ADMIN and CAP_NET_ADMIN in the host's user namespace (run as root)")

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
	once  sync.Once
	err   error
	nsFD  int
	table bool // the table was (or may have been) installed
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
	if !privileged() {
		return nil, fmt.Errorf("netfilter: setting up %s: %w", path, ErrUnprivileged)
	}
	fd, err := openNetNS(path)
	if err != nil {
		return nil, fmt.Errorf("netfilter: %w", err)
	}
	s := &Session{nsFD: fd}
	fail := func(err error) (*Session, error) {
		s.Close() // removes the table, whatever the namespace
		return nil, err
	}
	err = inNetNS(fd, func() error {
		if err := checkFresh(); err != nil {
			return err
		}
		if err := linkUp("lo"); err != nil {
			return err
		}
		if !f.egress {
			return nil
		}
		// The tap interface gets no IPv6 (no link-local address, no router
		// solicitation): the egress network is IPv4 only.
		if err := writeSysctl("net/ipv6/conf/default/disable_ipv6", "1", true); err != nil {
			return err
		}
		if f.hostLoop || len(f.forwards) > 0 {
			// 127.0.0.1 traffic redirected to the gateway, and forwarded traffic
			// redirected to 127.0.0.1, crosses the tap interface.
			if err := writeSysctl("net/ipv4/conf/all/route_localnet", "1", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("netfilter: network namespace %s: %w", path, err))
	}
	if !f.egress {
		return s, nil
	}
	// The table and the egress stack are set up side by side (slirp4netns spends
	// most of its start in its own dynamic loading): the program is held until
	// both are in place, so their order does not matter.
	type started struct {
		sl  *slirp
		err error
	}
	sc := make(chan started, 1)
	go func() {
		sl, err := startSlirp(ctx, slirpConfig{
			netns:    path,
			root:     true,
			hostLoop: f.hostLoop,
			api:      len(f.forwards) > 0,
		})
		sc <- started{sl, err}
	}()
	s.table = true
	ierr := f.rs.install(fd)
	st := <-sc
	s.slirp = st.sl
	if ierr != nil {
		return fail(fmt.Errorf("netfilter: network namespace %s: %w", path, ierr))
	}
	if st.err != nil {
		return fail(fmt.Errorf("netfilter: network namespace %s: %w", path, st.err))
	}
	sl := st.sl
	for _, fw := range f.forwards {
		if err := sl.forward(ctx, fw); err != nil {
			if portInUse(fw) {
				err = fmt.Errorf("the port is in use on the host (%w)", err)
			}
			return fail(fmt.Errorf("netfilter: forwarding the host's 127.0.0.1:%d (%s) into the sandbox, for %s: %s: %w",
				fw.Port, fw.Proto, fw.Rule.Ref, fw.Rule.Raw, err))
		}
	}
	sl.closeAPI()
	s.keepTable = strings.HasPrefix(path, "/proc/")
	return s, nil
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
			errs = append(errs, removeTable(s.nsFD))
		}
		if s.nsFD >= 0 {
			unix.Close(s.nsFD)
			s.nsFD = -1
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// Available reports whether Setup can work here: the privileges to join a
// sandbox's network namespace, nftables in the kernel, /dev/net/tun and
// slirp4netns. The error says what is missing (ErrUnprivileged among them).
func Available(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error
	priv := privileged()
	if !priv {
		errs = append(errs, ErrUnprivileged)
	}
	if _, err := lookSlirp(); err != nil {
		errs = append(errs, err)
	}
	if st, err := os.Stat("/dev/net/tun"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		errs = append(errs, errors.New("/dev/net/tun is missing (the kernel needs CONFIG_TUN)"))
	}
	if priv {
		fd, err := inNewNetNS(nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot create a network namespace: %w", err))
		} else {
			probe := ruleset{chains: []chain{{name: "output", typ: "filter", hook: "output", priority: -150, drop: true,
				rules: []nrule{{oifLo: true, verdict: vAccept}}}}}
			if err := probe.install(fd); err != nil {
				errs = append(errs, fmt.Errorf("nftables does not work here: %w", err))
			}
			unix.Close(fd)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("netfilter: %w", errors.Join(errs...))
	}
	return nil
}
