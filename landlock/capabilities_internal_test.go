package landlock

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestCapabilitiesTable: what the provider claims, by ABI, seccomp and identity
// mode. Never the names and metadata of unexposed paths (files-meta), nor hide.
func TestCapabilitiesTable(t *testing.T) {
	const base = driver.CapEnv | driver.CapFilesRead |
		driver.CapResourceLimits | driver.CapUnprivileged | driver.CapNoPrivileges
	const id = driver.CapIdentity | driver.CapFilesWrite
	const sc = driver.CapSeccomp | driver.CapUDPDeny | driver.CapRawSockets | driver.CapUnixSockets
	for _, tc := range []struct {
		abi  int
		sc   bool
		id   identityMode
		want driver.Capability
	}{
		{0, true, idNone, 0},
		{1, false, idNone, base},
		{3, true, idRoot, base | sc | id},
		{4, true, idNone, base | sc | driver.CapTCPPorts},
		{5, false, idNone, base},
		{6, false, idNone, base | driver.CapSignals},
		{7, true, idUserNS, base | sc | driver.CapTCPPorts | driver.CapSignals | id},
		{7, true, idSeccomp, base | sc | driver.CapTCPPorts | driver.CapSignals | id},
		{7, false, idNone, base | driver.CapSignals},
		{9, false, idNone, base | driver.CapSignals | driver.CapUnixSockets},
	} {
		got := capabilities(tc.abi, tc.sc, tc.id)
		if got != tc.want {
			t.Errorf("ABI %d seccomp %v identity %s: got %s, want %s", tc.abi, tc.sc, tc.id, got, tc.want)
		}
		for _, never := range []driver.Capability{driver.CapNetHosts, driver.CapUDP, driver.CapProcessIsolation,
			driver.CapFilesMeta, driver.CapHide} {
			if got.Has(never) {
				t.Errorf("ABI %d seccomp %v claims %s", tc.abi, tc.sc, never)
			}
		}
	}
}

// TestCapabilitiesFollowSeccomp: the registered provider's capabilities shrink
// when seccomp is unavailable (CGO_ENABLED=0 builds).
func TestCapabilitiesFollowSeccomp(t *testing.T) {
	p := &Provider{}
	if err := p.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	scOK := seccomp.Available() == nil
	got := p.Capabilities()
	want := capabilities(p.host().abi, scOK, p.host().id)
	if p.host().id == idRoot && hideview.Available() == nil {
		want |= driver.CapHide
	}
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if !scOK && (got.Has(driver.CapTCPPorts) || got.Has(driver.CapUDPDeny) || got.Has(driver.CapRawSockets) || got.Has(driver.CapSeccomp)) {
		t.Fatalf("without seccomp the provider claims %s", got)
	}
}

// fakeProvider is a provider with a given host state.
func fakeProvider(abi int, seccompErr error) *Provider {
	p := &Provider{}
	p.core.Host(func() hostState { return hostState{abi: abi, seccompErr: seccompErr} })
	return p
}

// TestOldABIErrorsNameTheABI: a kernel without TCP filtering (ABI < 4) cannot
// enforce "no TCP": Compile says which ABI is needed.
func TestOldABIErrorsNameTheABI(t *testing.T) {
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = compile(context.Background(), pol, 0, hostState{abi: 3, seccompErr: seccomp.Available()}, nil)
	if err == nil || !strings.Contains(err.Error(), "ABI 4") || !strings.Contains(err.Error(), "ABI 3") {
		t.Fatalf("want an error naming ABI 4, got %v", err)
	}
	if _, err := compile(context.Background(), pol, driver.CapTCPPorts, hostState{abi: 3, seccompErr: seccomp.Available()}, nil); err != nil {
		t.Fatalf("accepted: %v", err)
	}
}

// TestPlanNet: ALLOW ports per direction, DENY * subtracted, every port left
// unhandled, hosts and UDP refused unless accepted.
func TestPlanNet(t *testing.T) {
	net := func(lines ...string) *policy.Network {
		b := policy.NewBuilder()
		for _, l := range lines {
			b.Rule("net", l)
		}
		p, err := b.Build(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Network()
	}
	r := rightsOf(7)
	np := planNet(net(), 0, r)
	if np.handled != netBindTCP|netConnectTCP || len(np.ports) != 0 || !np.denyMPTCP || np.allowUDP || np.anyAllow {
		t.Errorf("no rule: %+v", np)
	}
	np = planNet(net("ALLOW|tcp|*|80,443,1000-1010|OUT", "DENY|tcp|*|1005|*", "ALLOW|tcp|*|8080|IN"), 0, r)
	want := "2:80-80 2:443-443 2:1000-1004 2:1006-1010 1:8080-8080"
	var got []string
	for _, p := range np.ports {
		got = append(got, fmt.Sprintf("%d:%d-%d", p.Access, p.Lo, p.Hi))
	}
	if strings.Join(got, " ") != want {
		t.Errorf("ports: got %q, want %q", strings.Join(got, " "), want)
	}
	np = planNet(net("ALLOW|tcp|*|*|OUT"), 0, r)
	if np.handled != netBindTCP {
		t.Errorf("every connect port: handled %#x, want bind only", np.handled)
	}
	np = planNet(net("ALLOW|*|*|*|*"), 0, r)
	if np.handled != 0 || np.denyMPTCP || !np.allowUDP || len(np.errs) != 0 {
		t.Errorf("open network: %+v", np)
	}
	np = planNet(net("ALLOW|tcp|10.0.0.0/8|443|OUT"), 0, r)
	if len(np.errs) != 1 || !strings.Contains(np.errs[0].Error(), "net=ALLOW|tcp|10.0.0.0/8|443|OUT") {
		t.Errorf("host rule: %v", np.errs)
	}
	np = planNet(net("ALLOW|tcp|10.0.0.0/8|443|OUT"), driver.CapNetHosts, r)
	if len(np.errs) != 0 || len(np.warnings) != 1 || len(np.ports) != 1 {
		t.Errorf("accepted host rule: %+v", np)
	}
	np = planNet(net("ALLOW|udp|*|53|OUT"), 0, r)
	if len(np.errs) != 1 || !strings.Contains(np.errs[0].Error(), "ABI 10") {
		t.Errorf("udp rule: %v", np.errs)
	}
	np = planNet(net("ALLOW|udp|*|53|OUT"), driver.CapUDP, rightsOf(10))
	if !np.allowUDP || np.handled&(netBindUDP|netSendUDP) != netBindUDP|netSendUDP || len(np.errs) != 0 {
		t.Errorf("udp rule, ABI 10: %+v", np)
	}
}
