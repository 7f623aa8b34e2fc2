package unshare

import (
	"context"
	"fmt"

	"github.com/pysandboxes/pysandboxes/policy"
)

// netPlan is the network part of the translation. The sandbox always has a
// network namespace of its own, whose only interface is the loopback one: with no
// net= ALLOW rule nothing leaves it, and the host's loopback (its listeners, its
// abstract Unix sockets) is out of reach.
type netPlan struct {
	// allowed: a net= rule lets some traffic out.
	allowed bool
	// allowUDP: a net= rule allows UDP (the seccomp filter lets UDP sockets be
	// made).
	allowUDP bool
	// hosts are lines added to the sandbox's /etc/hosts.
	hosts []byte
}

// planNetwork translates the net= rules. DENY rules need nothing: the private
// network namespace refuses everything already.
func planNetwork(_ context.Context, n *policy.Network) (*netPlan, []error) {
	np := &netPlan{}
	var errs []error
	for _, r := range n.Rules() {
		if r.Action != policy.Allow {
			continue
		}
		np.allowed = true
		if r.Protos&policy.UDP != 0 {
			np.allowUDP = true
		}
		errs = append(errs, fmt.Errorf("%s: cannot be enforced by unshare: the sandbox has a private network with "+
			"loopback only, and traffic that a net= ALLOW rule lets out needs the network filter, which is not available here", ruleRef(r.Rule)))
	}
	return np, errs
}

// files adds the resolver's files to the sandbox's root: /etc/hosts (localhost,
// and the pinned host names) unless the policy exposes the host's.
func (np *netPlan) files(p *rootPlan) {
	if p.covered("/etc/hosts") == nil {
		p.dir("/etc", 0o755)
		p.file("/etc/hosts", append([]byte(localHosts), np.hosts...), 0o644)
	}
}
