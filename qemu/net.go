package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// The guest's network: QEMU's user-mode network (libslirp inside QEMU). Every
// connection and datagram of the guest becomes a socket of the QEMU process,
// which runs in a network namespace of its own behind the network filter
// (internal/netfilter): the filter judges them outside the guest. The guest's
// network is not the filter's egress network (10.0.2.0/24), so that the
// guest's 10.0.2.3 is the filter's resolver, reached through QEMU as any other
// address.
const (
	guestNetwork = "10.0.3.0/24"
	guestAddr    = "10.0.3.15"
	guestGateway = "10.0.3.2" // QEMU maps it to its namespace's 127.0.0.1
	guestDNS     = "10.0.3.3" // QEMU's own resolver: asks the resolver of its /etc/resolv.conf
	guestPrefix  = 24
)

// guestNetdev is QEMU's -netdev of a VM with a network: the same for every
// policy (the rules are the filter's, outside QEMU), so that one saved state
// serves them all. IPv6 is off (the filter's egress network is IPv4 only).
var guestNetdev = fmt.Sprintf("user,id=n0,net=%s,host=%s,dns=%s,ipv6=off", guestNetwork, guestGateway, guestDNS)

// maxRelays bounds the ports of the host's loopback that the guest relays (a
// listening socket of the guest's init each).
const maxRelays = netfilter.MaxForwards

// inPortBase is the first port of the guest's address to which QEMU forwards
// a port of the host (the guest's init relays it to the program's
// 127.0.0.1): above the kernel's ephemeral range (32768-60999), so that the
// program's own connections never take one.
const inPortBase = 61000

// netPlan is the VM's network: the filter of QEMU's namespace, the guest's
// /etc/hosts and /etc/resolv.conf, the relays of the guest's init (the ports
// of 127.0.0.1 relayed to the host's loopback, the forwarded ports relayed to
// the program's 127.0.0.1) and QEMU's host forwards.
type netPlan struct {
	filter *netfilter.Filter
	files  []wire.Op
	relays []wire.Relay
	// hostfwds are QEMU's host forwards (hostfwd_add arguments).
	hostfwds []string
}

// planNetwork translates the net= rules (nil: no network device at all, when
// no rule lets traffic leave). netErr says why the filter cannot work here
// (nil: it can). A rule the VM cannot enforce exactly is refused, naming it.
func planNetwork(n *policy.Network, netErr func() error) (*netPlan, error) {
	if n == nil || n.Empty() {
		return nil, nil
	}
	rules := n.Rules()
	var errs []error
	allow := false
	for _, r := range rules {
		if r.Action != policy.Allow || len(r.Ports) == 0 {
			continue
		}
		allow = true
		if r.Dir&policy.Out == 0 {
			continue
		}
		for _, p := range r.Prefixes {
			if guestNet.Overlaps(p) && p.Bits() >= guestNet.Bits() {
				errs = append(errs, fmt.Errorf("%s: net rule '%s' cannot be enforced by qemu: %s lies in the guest's own network %s, whose addresses are not the hosts of that name",
					r.Ref, r.Raw, p, guestNet))
				break
			}
		}
	}
	if !allow {
		// DENY rules alone: the VM has no network device, which refuses
		// everything already.
		return nil, nil
	}
	f, err := netfilter.Compile(n)
	if err != nil {
		errs = append(errs, err)
		return nil, errors.Join(errs...)
	}
	var relays []wire.Relay
	for _, p := range []policy.Proto{policy.TCP, policy.UDP} {
		for _, pr := range f.HostLoopback(p) {
			for port := max(int(pr.Lo), 1); port <= int(pr.Hi); port++ {
				relays = append(relays, wire.Relay{Proto: p.String(), From: hostPort("127.0.0.1", port), To: hostPort(guestGateway, port)})
			}
		}
	}
	nOut := len(relays)
	// IN forwards: the filter forwards the host's 127.0.0.1:P to QEMU's
	// namespace's 127.0.0.1:P, where QEMU listens (hostfwd) and forwards to
	// a port of the guest's address, which the init relays to the program's
	// 127.0.0.1:P (listeners on 127.0.0.1 and 0.0.0.0 get it).
	var hostfwds []string
	for i, fw := range f.Forwards() {
		gp := inPortBase + i
		hostfwds = append(hostfwds, fmt.Sprintf("%s:127.0.0.1:%d-%s:%d", fw.Proto, fw.Port, guestAddr, gp))
		relays = append(relays, wire.Relay{Proto: fw.Proto.String(), From: hostPort(guestAddr, gp), To: hostPort("127.0.0.1", int(fw.Port))})
	}
	if nOut > maxRelays {
		var refs []string
		for _, r := range rules {
			if r.Action == policy.Allow && r.Dir&policy.Out != 0 && len(r.Ports) > 0 && containsAddr(r.Prefixes, hostLoopback) {
				refs = append(refs, fmt.Sprintf("%s: '%s'", r.Ref, r.Raw))
			}
		}
		errs = append(errs, fmt.Errorf("%s: net rules cannot be enforced by qemu: they let the program reach %d ports of the host's 127.0.0.1, "+
			"each a relay of the guest, at most %d can be: narrow their PORTS or name hosts other than the loopback",
			strings.Join(refs, ", "), nOut, maxRelays))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if !f.Egress() {
		return nil, nil
	}
	if err := netErr(); err != nil {
		for _, r := range rules {
			if r.Action == policy.Allow && len(r.Ports) > 0 {
				errs = append(errs, fmt.Errorf("%s: net rule '%s' cannot be enforced by qemu: the network filter around QEMU cannot work here: %w", r.Ref, r.Raw, err))
			}
		}
		return nil, errors.Join(errs...)
	}
	np := &netPlan{filter: f, relays: relays, hostfwds: hostfwds}
	np.files = append(np.files, wire.Op{Op: wire.OpFile, Path: "/etc/hosts", Data: f.Hosts()})
	if rc := f.ResolvConf(); rc != nil {
		np.files = append(np.files, wire.Op{Op: wire.OpFile, Path: "/etc/resolv.conf", Data: rc})
	}
	return np, nil
}

var (
	guestNet     = netip.MustParsePrefix(guestNetwork)
	hostLoopback = netip.MustParseAddr("127.0.0.1")
)

func hostPort(addr string, port int) string { return addr + ":" + strconv.Itoa(port) }

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// msg is the guest's network configuration.
func (np *netPlan) msg() *wire.NetMsg {
	return &wire.NetMsg{Addr: guestAddr, Prefix: guestPrefix, Gateway: guestGateway, Relays: np.relays}
}

// netnsAttr puts QEMU in a network namespace of its own (and, without root,
// in a user namespace of its own that owns it, where QEMU keeps the host's
// uid and gid): the filter is set up there before the guest's network is.
func netnsAttr(a *syscall.SysProcAttr) {
	a.Cloneflags |= syscall.CLONE_NEWNET
	if os.Geteuid() != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
}

// forward makes QEMU listen, in its namespace, on the ports the filter
// forwards from the host, for the guest (after the guest's relays are up).
func (np *netPlan) forward(v *vm) error {
	for _, fw := range np.hostfwds {
		out, err := v.mon.do("human-monitor-command", map[string]string{"command-line": "hostfwd_add n0 " + fw})
		var msg string
		if err == nil {
			json.Unmarshal(out, &msg)
			if msg = strings.TrimSpace(msg); msg != "" {
				err = errors.New(msg)
			}
		}
		if err != nil {
			return fmt.Errorf("qemu: forwarding %s into the VM: %w", fw, err)
		}
	}
	return nil
}

// start sets the filter up around the VM's QEMU while the guest starts; the
// channel gives the outcome. The filter goes with QEMU's end.
func (np *netPlan) start(ctx context.Context, v *vm) <-chan error {
	done := make(chan error, 1)
	pid := v.cmd.Process.Pid
	go func() {
		s, err := np.setupFilter(ctx, pid)
		if s != nil {
			v.onExit(func() { s.Close() })
		}
		done <- err
	}()
	return done
}

// setupFilter installs the filter in the namespace of QEMU (process pid) and
// starts its egress stack.
func (np *netPlan) setupFilter(ctx context.Context, pid int) (*netfilter.Session, error) {
	proc := "/proc/" + strconv.Itoa(pid) + "/ns/"
	ns := netfilter.Namespace{Net: proc + "net", PID: pid}
	if os.Geteuid() != 0 {
		ns.User = proc + "user"
	}
	s, err := np.filter.Setup(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("qemu: the network filter around the VM: %w", err)
	}
	return s, nil
}
