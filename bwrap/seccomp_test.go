package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestSeccompInEffect: the program runs under the seccomp filter (Seccomp: 2),
// with no_new_privs and no capability; mount, unshare, ptrace, keyctl, bpf and
// io_uring are refused (EPERM), so are UDP, raw and packet sockets without a
// net= rule; TCP and Unix sockets can be made.
func TestSeccompInEffect(t *testing.T) {
	providertest.RequireSeccomp(t)
	providertest.SeccompInEffect(t, providerName, map[string]string{"udp": "EPERM", "udp-out": "EPERM", "packet": "EPERM"})
}
