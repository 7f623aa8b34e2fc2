package unshare

import (
	"errors"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
)

// TestUserNamespaceLimits: each sysctl that keeps unprivileged users from making
// user namespaces is named, with how to change it; none is named when they allow
// them (or do not exist).
func TestUserNamespaceLimits(t *testing.T) {
	for _, tc := range []struct {
		values map[string]int
		want   []string
	}{
		{map[string]int{}, nil},
		{map[string]int{"kernel.unprivileged_userns_clone": 1, "user.max_user_namespaces": 100}, nil},
		{map[string]int{"kernel.unprivileged_userns_clone": 0}, []string{"kernel.unprivileged_userns_clone=0", "sysctl -w kernel.unprivileged_userns_clone=1"}},
		{map[string]int{"user.max_user_namespaces": 0}, []string{"user.max_user_namespaces=0"}},
		{map[string]int{"kernel.apparmor_restrict_unprivileged_userns": 1}, []string{"AppArmor", "apparmor_restrict_unprivileged_userns"}},
	} {
		got := userNamespaceLimitsOf(func(name string) (int, bool) { v, ok := tc.values[name]; return v, ok })
		if (got == "") != (len(tc.want) == 0) {
			t.Errorf("%v: %q", tc.values, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: %q lacks %q", tc.values, got, w)
			}
		}
	}
}

// TestCapabilitiesOfHost: nothing is claimed on a host where the provider cannot
// run; seccomp, the network filter and unprivileged use only where they work.
func TestCapabilitiesOfHost(t *testing.T) {
	if c := capabilities(hostState{err: errors.New("no")}); c != 0 {
		t.Errorf("capabilities without the provider: %v", c)
	}
	base := capabilities(hostState{seccompErr: errors.New("no"), netErr: errors.New("no")})
	for _, c := range []driver.Capability{driver.CapSeccomp, driver.CapNetHosts, driver.CapUDP, driver.CapUnprivileged} {
		if base.Has(c) {
			t.Errorf("%v claimed without what it needs", c)
		}
	}
	all := capabilities(hostState{unprivileged: true})
	for _, c := range []driver.Capability{driver.CapSeccomp, driver.CapNetHosts, driver.CapUDP, driver.CapUnprivileged} {
		if !all.Has(c) {
			t.Errorf("%v not claimed", c)
		}
	}
}
