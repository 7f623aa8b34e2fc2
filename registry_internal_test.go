package pysandboxes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

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
func (f fakeProvider) Prepare(context.Context, *Request) (*Launch, error) {
	return nil, errors.New("fake provider")
}

// withRegistry runs f with only the providers ps registered (the tests of this
// package do not run in parallel).
func withRegistry(t *testing.T, ps []Provider, f func()) {
	t.Helper()
	registry.Lock()
	saved := registry.m
	registry.m = map[string]Provider{}
	for _, p := range ps {
		registry.m[p.Name()] = p
	}
	registry.Unlock()
	defer func() {
		registry.Lock()
		registry.m = saved
		registry.Unlock()
	}()
	f()
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
	withRegistry(t, []Provider{fakeProvider{"landlock", contents}, subprocessProvider{}, noneProvider{}}, func() {
		_, err = New(ctx, pol, WithProvider("auto"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	})
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

// TestAutoNamesTheMissingImport: a program that links no OS provider (it did not
// import a provider package) is told which import registers one.
func TestAutoNamesTheMissingImport(t *testing.T) {
	ctx := context.Background()
	pol, err := policy.Parse(ctx, ".py-sandboxes", []byte("python-import=json\n"), &policy.Options{Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	withRegistry(t, []Provider{subprocessProvider{}, noneProvider{}}, func() {
		_, err = New(ctx, pol, WithProvider("auto"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	})
	var npe *NoProviderError
	if !errors.As(err, &npe) {
		t.Fatalf("New = %v, want *NoProviderError", err)
	}
	if !slices.Equal(npe.NotLinked, preference) {
		t.Errorf("NotLinked = %v, want %v", npe.NotLinked, preference)
	}
	if want := `import _ "github.com/pysandboxes/pysandboxes/landlock"`; !strings.Contains(err.Error(), want) {
		t.Errorf("error does not name the import to add (%s):\n%v", want, err)
	}
	// With a provider linked, it is not named.
	withRegistry(t, []Provider{fakeProvider{"landlock", 0}, subprocessProvider{}, noneProvider{}}, func() {
		_, err = New(ctx, pol, WithProvider("auto"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	})
	if !errors.As(err, &npe) || slices.Contains(npe.NotLinked, "landlock") {
		t.Errorf("with landlock linked: %v", err)
	}
}
