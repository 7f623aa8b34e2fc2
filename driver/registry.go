package driver

import (
	"fmt"
	"slices"
	"sync"
)

// preference is the order in which os-sandbox=auto considers providers: the kernel
// providers, least privileged and cheapest first (landlock is the default), then
// subprocess, which confines nothing and so only covers a policy that grants
// everything. Providers not listed come before subprocess, by name.
var preference = []string{"landlock", "unshare", "bwrap", "firejail", "qemu"}

// Builtin reports whether name is one of the providers os-sandbox=auto knows
// by name (a kernel provider that package pysandboxes may link).
func Builtin(name string) bool { return slices.Contains(preference, name) }

var registry struct {
	sync.RWMutex
	m map[string]Provider
}

// Register makes a provider available by its name, usually from the init
// function of the provider's package. It panics if the provider is nil or its
// name is empty, "auto" or already registered. pysandboxes.Register is the same
// registry.
func Register(p Provider) {
	if p == nil {
		panic("pysandboxes: Register of a nil provider")
	}
	name := p.Name()
	registry.Lock()
	defer registry.Unlock()
	if name == "" || name == "auto" {
		panic(fmt.Sprintf("pysandboxes: Register of a provider named %q", name))
	}
	if _, dup := registry.m[name]; dup {
		panic("pysandboxes: Register called twice for provider " + name)
	}
	if registry.m == nil {
		registry.m = map[string]Provider{}
	}
	registry.m[name] = p
}

// Lookup returns the registered provider with that name.
func Lookup(name string) (Provider, bool) {
	registry.RLock()
	defer registry.RUnlock()
	p, ok := registry.m[name]
	return p, ok
}

// Providers returns the registered providers in the order os-sandbox=auto
// considers them.
func Providers() []Provider {
	registry.RLock()
	defer registry.RUnlock()
	var out []Provider
	for _, name := range preference {
		if p, ok := registry.m[name]; ok {
			out = append(out, p)
		}
	}
	var rest []string
	for name := range registry.m {
		if !slices.Contains(preference, name) && name != "subprocess" && name != "none" {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range append(rest, "subprocess", "none") {
		if p, ok := registry.m[name]; ok {
			out = append(out, p)
		}
	}
	return out
}
