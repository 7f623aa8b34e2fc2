package landlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
	"github.com/pysandboxes/pysandboxes/landlock"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestWithoutSeccompPoliciesNeedingItAreRefused: without seccomp the default policy
// (no TCP, no UDP, no raw socket) is refused unless accepted, and an accepted
// sandbox runs without the seccomp stage.
func TestWithoutSeccompPoliciesNeedingItAreRefused(t *testing.T) {
	real := &landlock.Provider{}
	if err := real.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	p := landlock.FakeProvider(landlock.HostABI(real), seccomp.ErrUnavailable)
	pol, err := policy.NewBuilder().Build(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.UseProvider(p))
	var ue *pysandboxes.UnenforcedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "tcp-ports") || !strings.Contains(err.Error(), "udp-deny") {
		t.Fatalf("want tcp-ports and udp-deny unenforced, got %v", err)
	}
	c, err := p.Compile(context.Background(), pol, driver.CapTCPPorts|driver.CapUDPDeny|driver.CapRawSockets|driver.CapUnixSockets)
	if err != nil {
		t.Fatal(err)
	}
	if landlock.CompiledSeccomp(c) {
		t.Error("a seccomp stage without seccomp")
	}
}

// TestRefusalWithoutSeccompSaysWhy: the refusal of a policy that needs what
// seccomp enforces names the cause, the missing seccomp and why it is missing
// (a build without cgo), with the capabilities it costs.
func TestRefusalWithoutSeccompSaysWhy(t *testing.T) {
	real := &landlock.Provider{}
	if err := real.Probe(context.Background()); err != nil {
		t.Skip(err)
	}
	noCgo := fmt.Errorf("%w: built without cgo: seccomp filters need libseccomp; rebuild with CGO_ENABLED=1 and libseccomp-dev installed", seccomp.ErrUnavailable)
	p := landlock.FakeProvider(landlock.HostABI(real), noCgo)
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
	if why := landlock.FakeProvider(landlock.HostABI(real), nil).Explain(driver.CapFilesMeta | driver.CapTCPPorts); strings.Contains(why, "seccomp") {
		t.Errorf("Explain with seccomp = %q", why)
	}
	if why := landlock.FakeProvider(3, nil).Explain(driver.CapTCPPorts); !strings.Contains(why, "Landlock ABI 3 has no network rights (TCP ports need ABI 4)") {
		t.Errorf("Explain at ABI 3 = %q", why)
	}
}
