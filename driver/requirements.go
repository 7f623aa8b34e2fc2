package driver

import (
	"fmt"

	"github.com/pysandboxes/pysandboxes/policy"
)

// Requirement is one capability a policy needs from the OS layer, and the rule that
// needs it.
type Requirement struct {
	// Capability is a single capability.
	Capability Capability
	// Rule is the rule that needs it, or nil for the implicit default policy
	// (for example: with no net= rule, no TCP connection at all).
	Rule *policy.Rule
	// Why says what must be enforced, in a few words.
	Why string
}

// String renders the requirement as "file(line): rule: why (capability)".
func (r Requirement) String() string {
	where := "implicit default policy"
	if r.Rule != nil {
		where = r.Rule.Ref.String() + ": " + r.Rule.Raw
	}
	return fmt.Sprintf("%s: %s (%s)", where, r.Why, r.Capability)
}

// Requirements lists what the policy needs the OS layer to enforce: one entry per
// rule that needs a capability, plus the implicit default policy (nothing readable
// outside the exposed directories, no network without a net= rule, ...). A
// non-zero limits adds the resource limits.
func Requirements(p Policy, limits Limits) []Requirement {
	var out []Requirement
	add := func(c Capability, r *policy.Rule, why string) {
		out = append(out, Requirement{Capability: c, Rule: r, Why: why})
	}
	add(CapEnv, nil, "the environment holds only the variables env= grants")

	// Files: deny by default, unless a rule opens the whole tree.
	readAll, writeAll := false, false
	for _, e := range p.Exposes() {
		if e.Path == "/" {
			readAll = true
			writeAll = writeAll || e.Mode == policy.ReadWrite
		}
	}
	if !readAll {
		add(CapFilesRead, nil, "nothing outside the exposed directories is readable")
		add(CapFilesMeta, nil, "paths outside the exposed directories look absent (names, metadata, link targets, xattrs, watches)")
	}
	if !writeAll {
		add(CapFilesWrite, nil, "nothing outside the expose-rw directories can be changed (contents, entries, metadata, sysctls)")
		add(CapUnixSockets, nil, "host Unix sockets are unreachable")
		add(CapIdentity, nil, "the program holds no host identity (no host root, no owner rights on host files, no power over host processes)")
	}
	for _, ig := range p.Ignores() {
		ig := ig
		add(CapHide, &ig.Rule, "the ignored paths look absent, also when made or renamed later")
	}

	// Network: deny by default.
	net := p.Network()
	if net == nil || net.Empty() {
		add(CapTCPPorts, nil, "no TCP connection and no listening socket")
		add(CapUDPDeny, nil, "no UDP")
		add(CapRawSockets, nil, "no raw or packet socket")
	} else if !openNetwork(net) {
		tcp, udp := false, false
		for _, r := range net.Rules() {
			r := r
			if !r.Any {
				add(CapNetHosts, &r.Rule, fmt.Sprintf("filtering by host or network (%s)", r.Network))
			}
			if r.Protos&policy.TCP != 0 {
				add(CapTCPPorts, &r.Rule, "filtering TCP by port")
				tcp = tcp || r.Action == policy.Allow
			}
			if r.Protos&policy.UDP != 0 {
				add(CapUDP, &r.Rule, "filtering UDP by port")
				udp = udp || r.Action == policy.Allow
			}
		}
		if !tcp {
			add(CapTCPPorts, nil, "no TCP connection and no listening socket")
		}
		if !udp {
			add(CapUDPDeny, nil, "no UDP")
		}
		add(CapRawSockets, nil, "no raw or packet socket")
	}
	if limits.Kernel() {
		add(CapResourceLimits, nil, "the sandbox's resource limits apply")
	}
	return out
}

// openNetwork reports whether the network rules open everything: an ALLOW rule for
// every protocol, host, port and direction, and no DENY rule.
func openNetwork(n *policy.Network) bool {
	open := false
	for _, r := range n.Rules() {
		if r.Action == policy.Deny {
			return false
		}
		if r.Any && r.Protos == policy.AnyProto && r.Dir == policy.Both && len(r.Ports) == 1 &&
			r.Ports[0].Lo == 0 && r.Ports[0].Hi == 65535 {
			open = true
		}
	}
	return open
}

// Missing returns the requirements that caps does not cover.
func Missing(reqs []Requirement, caps Capability) []Requirement {
	var out []Requirement
	for _, r := range reqs {
		if !caps.Has(r.Capability) {
			out = append(out, r)
		}
	}
	return out
}
