package unshare

import (
	"encoding/json"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// landlockTCP is the Landlock ABI from which TCP bind can be restricted.
const landlockTCP = 4

// landlockABI returns the kernel's Landlock ABI (0 without Landlock).
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// bindStage returns the Landlock stage that lets the program bind TCP ports only
// as the policy's IN rules allow (nil when they allow every port, or without
// Landlock ABI 4). nftables sees packets, not sockets: without it, a program
// could listen on any port of the sandbox's own network (which nothing outside
// reaches unless forwarded). Only the TCP bind right is handled: files,
// connections (the network filter's) and everything else are left alone. MPTCP,
// which Landlock's TCP rules do not see, is refused by the seccomp filter.
func bindStage(n *policy.Network, abi int) (*supervise.Stage, error) {
	if abi < landlockTCP {
		return nil, nil
	}
	var allowed [65536]bool
	for _, r := range n.Rules() {
		if r.Action != policy.Allow || r.Dir&policy.In == 0 || r.Protos&policy.TCP == 0 {
			continue
		}
		for _, pr := range r.Ports {
			for p := int(pr.Lo); p <= int(pr.Hi); p++ {
				allowed[p] = true
			}
		}
	}
	for _, r := range n.Rules() {
		// A DENY rule for every local address takes its ports away again (one for
		// some addresses only is the network filter's: Landlock cannot tell the
		// addresses apart).
		if r.Action != policy.Deny || r.Dir&policy.In == 0 || r.Protos&policy.TCP == 0 || !r.Any {
			continue
		}
		for _, pr := range r.Ports {
			for p := int(pr.Lo); p <= int(pr.Hi); p++ {
				allowed[p] = false
			}
		}
	}
	var ports []supervise.LandlockPorts
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
		ports = append(ports, supervise.LandlockPorts{Access: unix.LANDLOCK_ACCESS_NET_BIND_TCP, Lo: uint16(lo), Hi: uint16(p)})
	}
	if all {
		return nil, nil
	}
	cfg, err := json.Marshal(supervise.LandlockConfig{ABI: landlockTCP, Net: unix.LANDLOCK_ACCESS_NET_BIND_TCP, Ports: ports})
	if err != nil {
		return nil, err
	}
	return &supervise.Stage{Kind: supervise.StageLandlock, Config: cfg}, nil
}
