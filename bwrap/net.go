package bwrap

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/policy"
)

// netPlan is the network of a policy with net= rules (nil without any: the
// sandbox has its own network namespace with loopback only).
type netPlan struct {
	filter *netfilter.Filter
	// setup: the filter must be set up in the sandbox's namespace before the
	// program runs (some rule lets traffic leave, or forwards a port into it).
	setup bool
	// udp: a rule allows UDP, so seccomp lets UDP sockets be made.
	udp bool
	// udpDNS: the filter lets DNS datagrams reach the sandbox's resolver (it names
	// one without "options use-vc").
	udpDNS bool
}

// netCapabilities are claimed when the network filter works here: traffic
// filtered by protocol, address or network, port and direction, UDP by port.
const netCapabilities = driver.CapNetHosts | driver.CapUDP

// netfilterAvailable reports whether net= rules can be filtered here.
func netfilterAvailable(ctx context.Context) error { return netfilter.Available(ctx) }

// planNetwork translates the net= rules. Without a rule the sandbox gets a
// private network namespace with loopback only: nothing outside is reachable.
// With rules, the network filter (internal/netfilter) compiles them; a rule it
// cannot serve is an error naming its file(line); a policy whose rules let
// traffic out, or forward ports in, needs the filter to work here.
func planNetwork(_ context.Context, n *policy.Network, h hostState) (*netPlan, []error) {
	if n.Empty() {
		return nil, nil
	}
	f, err := netfilter.Compile(n)
	if err != nil {
		return nil, []error{err}
	}
	np := &netPlan{filter: f, setup: f.Egress() || len(f.Forwards()) > 0}
	for _, l := range strings.Split(string(f.ResolvConf()), "\n") {
		if strings.HasPrefix(l, "nameserver ") {
			np.udpDNS = true
		}
		if strings.HasPrefix(l, "options ") && strings.Contains(l, "use-vc") {
			np.udpDNS = false
			break
		}
	}
	for _, r := range n.Rules() {
		if r.Action == policy.Allow && len(r.Ports) > 0 && r.Protos&policy.UDP != 0 {
			np.udp = true
		}
	}
	if np.setup && h.netErr != nil {
		var errs []error
		for _, r := range n.Rules() {
			if r.Action == policy.Allow && len(r.Ports) > 0 {
				errs = append(errs, fmt.Errorf("%s: the network filter cannot work here, so this rule cannot be enforced: %w", ruleRef(r.Rule), h.netErr))
			}
		}
		if len(errs) == 0 {
			errs = append(errs, fmt.Errorf("the network filter cannot work here: %w", h.netErr))
		}
		return nil, errs
	}
	return np, nil
}

// errNoInfo reports a bwrap that never said which process holds its namespaces.
var errNoInfo = errors.New("bwrap did not report its sandbox's namespaces")
