package qemu

import (
	"fmt"

	"github.com/pysandboxes/pysandboxes/policy"
)

// The guest's network (QEMU's user-mode network).
const (
	guestAddr    = "10.0.2.15"
	guestGateway = "10.0.2.2"
)

// netPlan is the VM's network: QEMU's -netdev, and /etc/hosts.
type netPlan struct {
	netdev string
	hosts  []byte
}

// planNetwork translates the net= rules (nil: no network at all).
func planNetwork(n *policy.Network) (*netPlan, error) {
	if n == nil || n.Empty() {
		return nil, nil
	}
	for _, r := range n.Rules() {
		return nil, fmt.Errorf("%s: %s: not supported yet", r.Ref, r.Raw)
	}
	return nil, nil
}
