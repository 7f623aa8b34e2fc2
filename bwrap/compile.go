package bwrap

import (
	"context"
	"fmt"
	"slices"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/needs"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/internal/wrapper"
	"github.com/pysandboxes/pysandboxes/policy"
)

// compiled is what Compile makes of a policy, once per sandbox: what every
// wrapper provider plans (package internal/wrapper: the network, the view, the
// listen rules), with the bwrap arguments of the policy and the seccomp filter.
type compiled struct {
	wrapper.Compiled
	params []string // the validated bwrap.<opt>= arguments
	asPID1 bool     // bwrap.as-pid-1: the program is the namespace's first process
	bpf    []byte   // the seccomp filter; nil without seccomp
	// udp: a net= rule allows UDP, so seccomp lets UDP sockets be made.
	udp bool
}

// Compile translates the policy once per sandbox (see the package documentation).
// It fails, naming the rule, when the policy needs something this provider cannot
// enforce and that the caller did not accept.
func (p *Provider) Compile(ctx context.Context, pol driver.Policy, accepted driver.Capability) (any, error) {
	h := p.host()
	return prepare.Compile(h.err, func() (*compiled, error) { return compile(ctx, pol, accepted, h, &p.core.Interps) })
}

// compile translates a policy for a host.
func compile(ctx context.Context, pol driver.Policy, accepted driver.Capability, h hostState, interps *needs.Interpreters) (*compiled, error) {
	c := &compiled{}
	return c, c.Compile(ctx, pol, accepted, h.core(), interps, wrapper.Steps{
		Params: func(ps []policy.Param) []error {
			args, names, errs := paramArgs(ps, h.known)
			c.params = args
			c.asPID1 = slices.Contains(names, "as-pid-1")
			return errs
		},
		Finish: func() error { return c.filter(h, pol.Network()) },
	})
}

// filter builds the seccomp filter (when the host can): UDP sockets refused
// unless a net= rule allows UDP, MPTCP ones too when Landlock's TCP bind rules
// apply.
func (c *compiled) filter(h hostState, n *policy.Network) error {
	c.udp = allowsUDP(n)
	if h.seccompErr != nil && c.Net != nil && c.Net.Setup && !c.udp && c.Net.Resolver != "" && !c.Accepted.Has(driver.CapUDPDeny) {
		// Without seccomp nothing refuses UDP sockets, and the filter lets DNS
		// datagrams reach the sandbox's resolver.
		return fmt.Errorf("without seccomp (%v), UDP sockets cannot be refused, and the network filter lets DNS datagrams reach the sandbox's resolver: "+
			"UDP is not refused entirely, as a policy without a UDP rule needs; add net=DENY|udp|*|53|OUT, or accept the capability %s",
			h.seccompErr, driver.CapUDPDeny)
	}
	if h.seccompErr != nil {
		return nil
	}
	prog, err := seccomp.Build(seccomp.Options{
		AllowUDP: c.udp,
		// MPTCP sockets go around Landlock's TCP bind rules.
		DenyMPTCP: c.Listen != nil,
		// The host's named sockets are not in the sandbox's file system, and its
		// abstract sockets belong to another network namespace.
		AllowUnixSockets: true,
	})
	if err != nil {
		return fmt.Errorf("cannot build the seccomp filter: %w", err)
	}
	c.bpf = prog.BPF()
	return nil
}

// allowsUDP reports a net= rule that allows UDP traffic (to some port).
func allowsUDP(n *policy.Network) bool {
	for _, r := range n.Rules() {
		if r.Action == policy.Allow && len(r.Ports) > 0 && r.Protos&policy.UDP != 0 {
			return true
		}
	}
	return false
}
