package unshare

import (
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/pysandboxes/pysandboxes/internal/nsutil"
	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"github.com/pysandboxes/pysandboxes/policy"
)

// landlockTCP is the Landlock ABI from which TCP bind can be restricted.
const landlockTCP = nsutil.ListenABI

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
	return nsutil.ListenStage(n)
}
