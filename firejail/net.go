package firejail

import (
	"context"
	"fmt"
	"strings"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/policy"
)

// netPlan is the network of a policy with net= rules (nil without any: the
// sandbox has loopback only, --net=none).
type netPlan struct {
	filter *netfilter.Filter
	// setup: the filter must be set up in a named namespace that firejail joins
	// (--netns): some rule lets traffic leave, or forwards a port into it.
	setup bool
	// dns is the resolver to name in the sandbox's resolv.conf ("" for none).
	dns string
}

// netCapabilities are claimed when the network filter works here: traffic
// filtered by protocol, address or network, port and direction, UDP by port.
const netCapabilities = driver.CapNetHosts | driver.CapUDP

// netfilterAvailable reports whether net= rules can be filtered here.
func netfilterAvailable(ctx context.Context) error { return netfilter.Available(ctx) }

// planNetwork translates the net= rules. Without a rule the sandbox has loopback
// only. With rules, the network filter (internal/netfilter) compiles them; a rule
// it cannot serve is an error naming its file(line); a policy whose rules let
// traffic out, or forward ports in, needs the filter to work here.
//
// firejail cannot refuse UDP sockets (its seccomp filter does not look at a
// socket's type): without a UDP rule, a datagram reaches nothing but the
// sandbox's own loopback, and, when rules let traffic out, the sandbox's
// resolver (DNS, which the filter lets through unless a DENY rule refuses it).
func planNetwork(_ context.Context, n *policy.Network, h hostState) (*netPlan, []error) {
	if n.Empty() {
		return nil, nil
	}
	f, err := netfilter.Compile(n)
	if err != nil {
		return nil, []error{err}
	}
	np := &netPlan{filter: f, setup: f.Egress() || len(f.Forwards()) > 0}
	if rc := string(f.ResolvConf()); !strings.Contains(rc, "use-vc") {
		for _, l := range strings.Split(rc, "\n") {
			if v, ok := strings.CutPrefix(l, "nameserver "); ok {
				np.dns = strings.TrimSpace(v)
			}
		}
	}
	var errs []error
	if np.setup && h.netErr != nil {
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
	return np, errs
}
