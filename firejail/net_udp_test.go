package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNetUDPByPort: a UDP rule lets datagrams out to its port only (the filter
// drops the others: send fails with EPERM), and the replies come back.
func TestNetUDPByPort(t *testing.T) {
	providertest.NetUDPByPort(t, providerName, newTestNet(t))
}
