package landlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestCapabilitiesTable: what the provider claims, by ABI, seccomp and identity
// mode. Never the names and metadata of unexposed paths (files-meta), nor hide.
func TestCapabilitiesTable(t *testing.T) {
	const base = pysandboxes.CapEnv | pysandboxes.CapFilesRead |
		pysandboxes.CapResourceLimits | pysandboxes.CapUnprivileged | pysandboxes.CapNoPrivileges
	const id = pysandboxes.CapIdentity | pysandboxes.CapFilesWrite
	const sc = pysandboxes.CapSeccomp | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets | pysandboxes.CapUnixSockets
	for _, tc := range []struct {
		abi  int
		sc   bool
		id   identityMode
		want pysandboxes.Capability
	}{
		{0, true, idNone, 0},
		{1, false, idNone, base},
		{3, true, idRoot, base | sc | id},
		{4, true, idNone, base | sc | pysandboxes.CapTCPPorts},
		{5, false, idNone, base},
		{6, false, idNone, base | pysandboxes.CapSignals},
		{7, true, idUserNS, base | sc | pysandboxes.CapTCPPorts | pysandboxes.CapSignals | id},
		{7, true, idSeccomp, base | sc | pysandboxes.CapTCPPorts | pysandboxes.CapSignals | id},
		{7, false, idNone, base | pysandboxes.CapSignals},
		{9, false, idNone, base | pysandboxes.CapSignals | pysandboxes.CapUnixSockets},
	} {
		got := capabilities(tc.abi, tc.sc, tc.id)
		if got != tc.want {
			t.Errorf("ABI %d seccomp %v identity %s: got %s, want %s", tc.abi, tc.sc, tc.id, got, tc.want)
		}
		for _, never := range []pysandboxes.Capability{pysandboxes.CapNetHosts, pysandboxes.CapUDP, pysandboxes.CapProcessIsolation,
			pysandboxes.CapFilesMeta, pysandboxes.CapHide} {
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
		want |= pysandboxes.CapHide
	}
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if !scOK && (got.Has(pysandboxes.CapTCPPorts) || got.Has(pysandboxes.CapUDPDeny) || got.Has(pysandboxes.CapRawSockets) || got.Has(pysandboxes.CapSeccomp)) {
		t.Fatalf("without seccomp the provider claims %s", got)
	}
}

// fakeProvider is a provider with a given host state.
func fakeProvider(abi int, seccompErr error) *Provider {
	p := &Provider{}
	p.once.Do(func() { p.state = hostState{abi: abi, seccompErr: seccompErr} })
	return p
}

// TestWithoutSeccompPoliciesNeedingItAreRefused: without seccomp the default policy
// (no TCP, no UDP, no raw socket) is refused unless accepted, and an accepted
// sandbox runs without the seccomp stage.
func TestWithoutSeccompPoliciesNeedingItAreRefused(t *testing.T) {
	real := &Provider{}
	if err := real.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	p := fakeProvider(real.host().abi, seccomp.ErrUnavailable)
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.UseProvider(p))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "tcp-ports") || !strings.Contains(err.Error(), "udp-deny") {
		t.Fatalf("want tcp-ports and udp-deny unenforced, got %v", err)
	}
	c, err := p.Compile(context.Background(), pol, pysandboxes.CapTCPPorts|pysandboxes.CapUDPDeny|pysandboxes.CapRawSockets|pysandboxes.CapUnixSockets)
	if err != nil {
		t.Fatal(err)
	}
	if c.(*compiled).seccomp != nil {
		t.Error("a seccomp stage without seccomp")
	}
}

// TestRefusalWithoutSeccompSaysWhy: the refusal of a policy that needs what
// seccomp enforces names the cause, the missing seccomp and why it is missing
// (a build without cgo), with the capabilities it costs.
func TestRefusalWithoutSeccompSaysWhy(t *testing.T) {
	real := &Provider{}
	if err := real.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	noCgo := fmt.Errorf("%w: built without cgo: seccomp filters need libseccomp; rebuild with CGO_ENABLED=1 and libseccomp-dev installed", seccomp.ErrUnavailable)
	p := fakeProvider(real.host().abi, noCgo)
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.UseProvider(p))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) {
		t.Fatalf("want an UnenforcedError, got %v", err)
	}
	if !strings.Contains(err.Error(), "\nlandlock: without seccomp (") {
		t.Errorf("the refusal does not give the provider's reason on a line of its own:\n%v", err)
	}
	for _, want := range []string{"without seccomp (seccomp filters are not available: built without cgo", "CGO_ENABLED=1",
		"), it does not enforce ", "unix-sockets", "tcp-ports", "udp-deny", "raw-sockets", "files-meta is never enforced"} {
		if !strings.Contains(ue.Why, want) || !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	// With seccomp, nothing is blamed on it.
	if why := fakeProvider(real.host().abi, nil).Explain(pysandboxes.CapFilesMeta | pysandboxes.CapTCPPorts); strings.Contains(why, "seccomp") {
		t.Errorf("Explain with seccomp = %q", why)
	}
	if why := fakeProvider(3, nil).Explain(pysandboxes.CapTCPPorts); !strings.Contains(why, "Landlock ABI 3 has no network rights (TCP ports need ABI 4)") {
		t.Errorf("Explain at ABI 3 = %q", why)
	}
}

// TestOldABIErrorsNameTheABI: a kernel without TCP filtering (ABI < 4) cannot
// enforce "no TCP": Compile says which ABI is needed.
func TestOldABIErrorsNameTheABI(t *testing.T) {
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = compile(context.Background(), pol, 0, hostState{abi: 3, seccompErr: seccomp.Available()})
	if err == nil || !strings.Contains(err.Error(), "ABI 4") || !strings.Contains(err.Error(), "ABI 3") {
		t.Fatalf("want an error naming ABI 4, got %v", err)
	}
	if _, err := compile(context.Background(), pol, pysandboxes.CapTCPPorts, hostState{abi: 3, seccompErr: seccomp.Available()}); err != nil {
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
	np = planNet(net("ALLOW|tcp|10.0.0.0/8|443|OUT"), pysandboxes.CapNetHosts, r)
	if len(np.errs) != 0 || len(np.warnings) != 1 || len(np.ports) != 1 {
		t.Errorf("accepted host rule: %+v", np)
	}
	np = planNet(net("ALLOW|udp|*|53|OUT"), 0, r)
	if len(np.errs) != 1 || !strings.Contains(np.errs[0].Error(), "ABI 10") {
		t.Errorf("udp rule: %v", np.errs)
	}
	np = planNet(net("ALLOW|udp|*|53|OUT"), pysandboxes.CapUDP, rightsOf(10))
	if !np.allowUDP || np.handled&(netBindUDP|netSendUDP) != netBindUDP|netSendUDP || len(np.errs) != 0 {
		t.Errorf("udp rule, ABI 10: %+v", np)
	}
}
