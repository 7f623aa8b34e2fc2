package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNetTCPByHostAndPort: with net= rules, TCP leaves only to the allowed
// address and port (the filter answers anything else with a reset:
// ECONNREFUSED), a DENY rule wins over a wider ALLOW, and UDP is dropped by the
// filter (send fails with EPERM) without a UDP rule; the server sees only the
// allowed connection.
func TestNetTCPByHostAndPort(t *testing.T) {
	providertest.NetTCPByHostAndPort(t, providerName, newTestNet(t))
}
