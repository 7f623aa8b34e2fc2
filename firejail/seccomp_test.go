package firejail_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestSeccompInEffect: the program runs under firejail's seccomp filter
// (Seccomp: 2) and the provider's additions, with no_new_privs and no
// capability: mount, unshare, ptrace, keyctl, bpf and io_uring are refused
// (EPERM), raw sockets too (no CAP_NET_RAW), packet sockets by the protocol
// filter (EOPNOTSUPP); TCP, UDP and Unix sockets can be made (UDP reaches
// nothing: the only interface is loopback).
func TestSeccompInEffect(t *testing.T) {
	providertest.SeccompInEffect(t, providerName, map[string]string{"udp": "OK None", "udp-out": "ENETUNREACH", "packet": "ENOTSUP"}) // packet: EOPNOTSUPP
}
