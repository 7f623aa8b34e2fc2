package landlock

import (
	"fmt"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// portSet is a set of ports (0-65535).
type portSet [1024]uint64

func (s *portSet) addRange(lo, hi uint16) {
	for p := int(lo); p <= int(hi); p++ {
		s[p>>6] |= 1 << (p & 63)
	}
}

func (s *portSet) removeRange(lo, hi uint16) {
	for p := int(lo); p <= int(hi); p++ {
		s[p>>6] &^= 1 << (p & 63)
	}
}

func (s *portSet) has(p int) bool { return s[p>>6]&(1<<(p&63)) != 0 }

func (s *portSet) full() bool {
	for _, w := range s {
		if w != ^uint64(0) {
			return false
		}
	}
	return true
}

func (s *portSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

// ranges returns the set as sorted, disjoint inclusive ranges.
func (s *portSet) ranges() []policy.PortRange {
	var out []policy.PortRange
	for p := 0; p <= 65535; p++ {
		if !s.has(p) {
			continue
		}
		lo := p
		for p+1 <= 65535 && s.has(p+1) {
			p++
		}
		out = append(out, policy.PortRange{Lo: uint16(lo), Hi: uint16(p)})
	}
	return out
}

// netPlan is the network part of the translation.
type netPlan struct {
	handled   uint64 // Landlock network rights handled
	ports     []supervise.LandlockPorts
	allowUDP  bool // seccomp lets UDP sockets be created
	denyMPTCP bool // seccomp refuses MPTCP (whenever TCP is handled)
	anyAllow  bool // some traffic is allowed: the resolver's files are granted
	warnings  []string
	errs      []error
}

// ruleRef renders a rule for messages: "file(line): text".
func ruleRef(r policy.Rule) string { return r.Ref.String() + ": " + r.Raw }

// planNet translates the net= rules. TCP is always handled (from ABI 4): ALLOW
// rules open their ports, connect for OUT and bind for IN; DENY rules for every
// host (*) take their ports away again; a right whose allowed set is every port
// is left unhandled. Hosts cannot be told apart by Landlock: a rule naming one is
// refused unless the caller accepted net-hosts, and then opens its ports for every
// host. UDP cannot be filtered by port before ABI 10: a UDP ALLOW rule is refused
// unless the caller accepted udp, and then seccomp lets UDP through entirely (from
// ABI 10 Landlock still filters its ports).
func planNet(n *policy.Network, accepted driver.Capability, r abiRights) netPlan {
	var np netPlan
	var tcpConnect, tcpBind, udpSend, udpBind portSet
	udpRules := false
	for _, rule := range n.Rules() {
		if len(rule.Ports) == 0 {
			continue
		}
		if rule.Action == policy.Allow {
			np.anyAllow = true
		}
		if !rule.Any {
			switch {
			case accepted.Has(driver.CapNetHosts):
				if rule.Action == policy.Allow {
					np.warnings = append(np.warnings, fmt.Sprintf("%s: Landlock filters ports only: its ports are open for every host (hosts are checked by the Python layer only)", ruleRef(rule.Rule)))
				} else {
					np.warnings = append(np.warnings, fmt.Sprintf("%s: Landlock cannot refuse a host: this DENY rule is checked by the Python layer only", ruleRef(rule.Rule)))
				}
			default:
				np.errs = append(np.errs, fmt.Errorf("%s: Landlock filters TCP by port only and cannot tell hosts apart (%s): accept the capability %s to have hosts checked by the Python layer only",
					ruleRef(rule.Rule), rule.Network, driver.CapNetHosts))
				continue
			}
			if rule.Action == policy.Deny {
				continue // cannot be enforced per host: not subtracted from anything
			}
		}
		for _, pr := range rule.Ports {
			if rule.Protos&policy.TCP != 0 {
				if rule.Action == policy.Allow {
					if rule.Dir&policy.Out != 0 {
						tcpConnect.addRange(pr.Lo, pr.Hi)
					}
					if rule.Dir&policy.In != 0 {
						tcpBind.addRange(pr.Lo, pr.Hi)
					}
				}
			}
			if rule.Protos&policy.UDP != 0 && rule.Action == policy.Allow {
				udpRules = true
				if rule.Dir&policy.Out != 0 {
					udpSend.addRange(pr.Lo, pr.Hi)
				}
				if rule.Dir&policy.In != 0 {
					udpBind.addRange(pr.Lo, pr.Hi)
				}
			}
		}
	}
	// DENY for every host wins over ALLOW.
	for _, rule := range n.Rules() {
		if rule.Action != policy.Deny || !rule.Any {
			continue
		}
		for _, pr := range rule.Ports {
			if rule.Protos&policy.TCP != 0 {
				if rule.Dir&policy.Out != 0 {
					tcpConnect.removeRange(pr.Lo, pr.Hi)
				}
				if rule.Dir&policy.In != 0 {
					tcpBind.removeRange(pr.Lo, pr.Hi)
				}
			}
			if rule.Protos&policy.UDP != 0 {
				if rule.Dir&policy.Out != 0 {
					udpSend.removeRange(pr.Lo, pr.Hi)
				}
				if rule.Dir&policy.In != 0 {
					udpBind.removeRange(pr.Lo, pr.Hi)
				}
			}
		}
	}

	addPorts := func(access uint64, s *portSet) {
		if s.full() {
			return // every port: the right is left unhandled
		}
		np.handled |= access
		for _, pr := range s.ranges() {
			np.ports = append(np.ports, supervise.LandlockPorts{Access: access, Lo: pr.Lo, Hi: pr.Hi})
		}
	}
	if r.net&(netBindTCP|netConnectTCP) != 0 {
		addPorts(netConnectTCP, &tcpConnect)
		addPorts(netBindTCP, &tcpBind)
		np.denyMPTCP = np.handled&(netBindTCP|netConnectTCP) != 0
	} else if !tcpConnect.full() || !tcpBind.full() {
		if accepted.Has(driver.CapTCPPorts) {
			np.warnings = append(np.warnings, fmt.Sprintf("Landlock ABI %d cannot filter TCP (ABI %d can): TCP is not restricted", r.version, abiTCP))
		} else {
			np.errs = append(np.errs, fmt.Errorf("the TCP rules (and the default: no TCP without a net= rule) need Landlock ABI %d, this kernel offers ABI %d", abiTCP, r.version))
		}
	}

	udpAll := udpSend.full() && udpBind.full()
	switch {
	case !udpRules:
		// No UDP at all: seccomp refuses UDP sockets.
	case udpAll:
		np.allowUDP = true // every port for every host: nothing to filter
	case accepted.Has(driver.CapUDP):
		np.allowUDP = true
		if r.version < abiUDP {
			np.warnings = append(np.warnings, fmt.Sprintf("Landlock ABI %d cannot filter UDP by port (ABI %d can): UDP is allowed to every port", r.version, abiUDP))
		}
	default:
		for _, rule := range n.Rules() {
			if rule.Action == policy.Allow && rule.Protos&policy.UDP != 0 && len(rule.Ports) > 0 {
				np.errs = append(np.errs, fmt.Errorf("%s: Landlock ABI %d cannot filter UDP by port (ABI %d can; seccomp can only refuse UDP entirely): accept the capability %s to allow UDP to every port",
					ruleRef(rule.Rule), r.version, abiUDP, driver.CapUDP))
			}
		}
	}
	if r.net&(netBindUDP|netSendUDP) != 0 {
		if np.allowUDP && !udpAll && !udpSend.empty() {
			// The kernel binds an unbound socket to an ephemeral port on its first send.
			udpBind.addRange(0, 0)
		}
		addPorts(netSendUDP, &udpSend)
		addPorts(netBindUDP, &udpBind)
	}
	return np
}
