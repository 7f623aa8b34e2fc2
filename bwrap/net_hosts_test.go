package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestNetHostLoopbackAndNames: an OUT rule for the host's 127.0.0.1 reaches a
// listener of the host on that port only (any other port of 127.0.0.1 is the
// sandbox's own loopback); the sandbox's /etc/hosts holds the pinned names
// (localhost here) and its /etc/resolv.conf names the filter's resolver.
func TestNetHostLoopbackAndNames(t *testing.T) {
	providertest.Require(t, providerName)
	newTestNet(t) // skips without the filter
	providertest.NetHostLoopbackAndNames(t, providerName, true)
}

// TestNetNoLeaks: runs with the filter leave no slirp4netns, descriptor or child
// behind.
func TestNetNoLeaks(t *testing.T) {
	providertest.NetNoLeaks(t, providerName, newTestNet(t))
}
