package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// The network tests build a network of their own (see providertest.NewNet) and
// send traffic only to it: 10.234.R.0/24.

const (
	tcpA, tcpB, tcpC = providertest.TCPA, providertest.TCPB, providertest.TCPC
	udpA, udpB       = providertest.UDPA, providertest.UDPB
	netPrelude       = providertest.NetPrelude
)

// newTestNet builds the test network of one test, removed at its end.
func newTestNet(t *testing.T) *providertest.Net {
	t.Helper()
	return providertest.NewNet(t, providerName, 234, "fj")
}
