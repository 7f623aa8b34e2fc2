package landlock

// FakeProvider is a provider with a given host state (Landlock ABI, and the
// error of the seccomp probe), for the tests that run it through a sandbox.
func FakeProvider(abi int, seccompErr error) *Provider { return fakeProvider(abi, seccompErr) }

// HostABI is the Landlock ABI p found on this host (after a successful Probe).
func HostABI(p *Provider) int { return p.host().abi }

// CompiledSeccomp reports whether the compiled form c has a seccomp stage.
func CompiledSeccomp(c any) bool { return c.(*compiled).seccomp != nil }
