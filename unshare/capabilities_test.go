package unshare_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// TestCapabilities: what the provider declares on this host, no more: the file,
// environment, process and privilege capabilities, the private network (host and
// UDP filtering only when the network filter works here), seccomp when filters
// can be built, hide only when the filter of ignore= paths serves the sandbox (a
// host that runs as root, with /dev/fuse and idmapped mounts: never for an
// unprivileged host, whose masks hold only for the files present at start).
func TestCapabilities(t *testing.T) {
	p := providertest.Require(t, "unshare")
	caps := p.Capabilities()
	want := pysandboxes.CapEnv | pysandboxes.CapFilesRead | pysandboxes.CapFilesWrite |
		pysandboxes.CapUnixSockets | pysandboxes.CapTCPPorts | pysandboxes.CapUDPDeny | pysandboxes.CapRawSockets |
		pysandboxes.CapSignals | pysandboxes.CapResourceLimits | pysandboxes.CapProcessIsolation | pysandboxes.CapNoPrivileges
	if !caps.Has(want) {
		t.Errorf("capabilities %v lack %v", caps, want&^caps)
	}
	if filter := netfilter.Available(context.Background()) == nil; caps.Has(pysandboxes.CapNetHosts|pysandboxes.CapUDP) != filter {
		t.Errorf("capabilities %v: host and UDP filtering claimed %v, the network filter works here: %v",
			caps, caps.Has(pysandboxes.CapNetHosts|pysandboxes.CapUDP), filter)
	}
	// Run as root, the sandbox's root is another uid (identity, by idmapped
	// mounts), for which the host's root mounts the filter.
	filter := hideview.Available() == nil && os.Geteuid() == 0 && caps.Has(pysandboxes.CapIdentity)
	if got := caps.Has(pysandboxes.CapHide); got != filter {
		t.Errorf("hide claimed %v, the filter of ignore= paths serves the sandbox here: %v (%v)", got, filter, hideview.Available())
	}
	if got := caps.Has(pysandboxes.CapSeccomp); got != (seccomp.Available() == nil) {
		t.Errorf("seccomp claimed %v, available %v", got, seccomp.Available())
	}
	d, ok := p.(interface{ Details() []string })
	if !ok {
		t.Fatal("no Details")
	}
	text := strings.Join(d.Details(), "\n")
	for _, w := range []string{"namespaces:", "root:", "ignore=", "no_new_privs"} {
		if !strings.Contains(text, w) {
			t.Errorf("details lack %q:\n%s", w, text)
		}
	}
}

// TestNamedRefusesUnenforceable: os-sandbox=unshare refuses a policy whose rules
// need what it does not enforce here, naming the rule (without the network
// filter: filtering by host); with the capability accepted, an ALLOW rule still
// needs the filter, so Compile refuses it.
func TestNamedRefusesUnenforceable(t *testing.T) {
	p := providertest.Require(t, "unshare")
	if p.Capabilities().Has(pysandboxes.CapNetHosts) {
		t.Skip("the network filter works here: unshare enforces every net= rule it accepts")
	}
	pol := providertest.Build(t, "net=ALLOW|tcp|192.0.2.1|443|OUT")
	_, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()))
	if err == nil || !strings.Contains(err.Error(), "net=ALLOW|tcp|192.0.2.1|443|OUT") {
		t.Fatalf("want a refusal naming the rule, got %v", err)
	}
	_, err = pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()),
		pysandboxes.AcceptUnenforced(pysandboxes.CapNetHosts))
	if err == nil || !strings.Contains(err.Error(), "network filter") {
		t.Fatalf("want a refusal naming the network filter, got %v", err)
	}
}

// TestUnknownParameter: an unshare.* key the provider does not know is an error
// naming it.
func TestUnknownParameter(t *testing.T) {
	providertest.Require(t, "unshare")
	for _, rule := range []string{"unshare.nope=1", "unshare.host-tmp=maybe", "unshare.tmp-size=lots"} {
		_, err := pysandboxes.New(context.Background(), providertest.Build(t, rule), pysandboxes.WithProvider("unshare"), pysandboxes.WithLogger(providertest.QuietLogger()))
		if err == nil || !strings.Contains(err.Error(), rule) {
			t.Errorf("%s: want a refusal naming it, got %v", rule, err)
		}
	}
}
