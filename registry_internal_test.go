package pysandboxes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/policy"
)

// fakeProvider claims caps and runs nothing (New never starts a program).
type fakeProvider struct {
	name string
	caps Capability
}

func (f fakeProvider) Name() string                { return f.name }
func (f fakeProvider) Probe(context.Context) error { return nil }
func (f fakeProvider) Capabilities() Capability    { return f.caps }
func (f fakeProvider) Prepare(context.Context, *driver.Request) (*driver.Launch, error) {
	return nil, errors.New("fake provider")
}

// only makes the sandbox choose among ps alone, as if they were the only
// providers registered.
func only(ps ...Provider) Option { return func(c *config) { c.providers = ps } }

// builtin returns the registered provider name.
func builtin(t *testing.T, name string) Provider {
	t.Helper()
	p, ok := Lookup(name)
	if !ok {
		t.Fatalf("provider %s is not registered", name)
	}
	return p
}

// TestAutoRefusesWhatNoProviderEnforces: when no registered provider covers the
// policy, auto returns a *NoProviderError that names, provider by provider,
// each rule it cannot enforce with its file(line), and never considers "none".
func TestAutoRefusesWhatNoProviderEnforces(t *testing.T) {
	ctx := context.Background()
	pol, err := policy.Parse(ctx, ".py-sandboxes", []byte("ignore=.env\nnet=ALLOW|tcp|127.0.0.1|443|OUT\n"), &policy.Options{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	contents := CapEnv | CapFilesRead | CapFilesWrite | CapIdentity | CapUnixSockets | CapTCPPorts | CapUDPDeny | CapRawSockets
	_, err = New(ctx, pol, WithProvider("auto"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		only(fakeProvider{"landlock", contents}, builtin(t, "subprocess"), builtin(t, "none")))
	var npe *NoProviderError
	if !errors.As(err, &npe) {
		t.Fatalf("New = %v, want *NoProviderError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		".py-sandboxes(1): ignore=.env: the ignored paths look absent, also when made or renamed later (hide)",
		".py-sandboxes(2): net=ALLOW|tcp|127.0.0.1|443|OUT: filtering by host or network (127.0.0.1) (net-hosts)",
		"implicit default policy: paths outside the exposed directories look absent (names, metadata, link targets, xattrs, watches) (files-meta)",
		"implicit default policy: nothing outside the exposed directories is readable (files-read)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q:\n%s", want, msg)
		}
	}
	for _, v := range npe.Verdicts {
		if v.Provider == "none" {
			t.Errorf("auto considered the provider none")
		}
	}
}
