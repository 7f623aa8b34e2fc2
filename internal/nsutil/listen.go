// Package nsutil holds what the namespace providers (unshare, bwrap, firejail)
// share beyond the file-system view (package internal/hostview) and the network
// filter (package internal/netfilter): the Landlock stage that limits which TCP
// ports the program may listen on.
package nsutil

import (
	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// ListenABI is the Landlock ABI from which TCP bind can be restricted.
const ListenABI = 4

// ListenStage returns a Landlock ruleset that handles TCP bind only (no file
// right, so the provider's mounts are not affected): the program may bind
// (listen on) only the ports ALLOW IN rules give, any address, minus the ports
// of DENY IN rules for every address (one for some addresses only is the
// network filter's: Landlock cannot tell the addresses apart). The network
// namespace already keeps every listener out of reach; this refuses the listen
// itself, as the policy asks. nil when every port is allowed. The caller checks
// that the kernel offers ListenABI.
func ListenStage(n *policy.Network) (*supervise.Stage, error) {
	var allowed [65536]bool
	for _, r := range n.Rules() {
		if r.Action != policy.Allow || r.Protos&policy.TCP == 0 || r.Dir&policy.In == 0 {
			continue
		}
		for _, pr := range r.Ports {
			for p := int(pr.Lo); p <= int(pr.Hi); p++ {
				allowed[p] = true
			}
		}
	}
	for _, r := range n.Rules() {
		if r.Action != policy.Deny || !r.Any || r.Protos&policy.TCP == 0 || r.Dir&policy.In == 0 {
			continue
		}
		for _, pr := range r.Ports {
			for p := int(pr.Lo); p <= int(pr.Hi); p++ {
				allowed[p] = false
			}
		}
	}
	cfg := supervise.LandlockConfig{ABI: ListenABI, Net: unix.LANDLOCK_ACCESS_NET_BIND_TCP}
	all := true
	for p := 0; p <= 65535; p++ {
		if !allowed[p] {
			all = false
			continue
		}
		lo := p
		for p+1 <= 65535 && allowed[p+1] {
			p++
		}
		cfg.Ports = append(cfg.Ports, supervise.LandlockPorts{Access: unix.LANDLOCK_ACCESS_NET_BIND_TCP, Lo: uint16(lo), Hi: uint16(p)})
	}
	if all {
		return nil, nil
	}
	return &supervise.Stage{Kind: supervise.StageLandlock, Landlock: &cfg}, nil
}
