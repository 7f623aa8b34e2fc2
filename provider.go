package pysandboxes

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
)

// Provider is an OS sandbox: it turns a policy and a command into a process that
// the kernel confines. Providers register themselves with Register (usually in an
// init function, like database/sql drivers) and are chosen by the policy's
// os-sandbox= rule or by WithProvider.
type Provider interface {
	// Name is the os-sandbox= value that selects the provider.
	Name() string
	// Probe reports whether the provider can run here and now (kernel features,
	// binaries, privileges). Its error says exactly what is missing and how to get it.
	Probe(ctx context.Context) error
	// Capabilities is what the provider enforces on this host (after a successful
	// Probe). A provider never claims a capability it does not enforce.
	Capabilities() Capability
	// Prepare turns a request into a Launch: a process that starts confined. It
	// fails when it cannot set up a restriction (fail closed).
	Prepare(ctx context.Context, req *Request) (*Launch, error)
}

// Compiler is implemented by providers that translate a policy once per Sandbox
// instead of at every start (for example, to walk the exposed directories).
// New calls Compile once it has chosen the provider; an error refuses the sandbox,
// and must name the rule it cannot enforce. accepted holds the capabilities the
// caller accepted as not enforced (AcceptUnenforced): a provider may then run with
// that part of the policy unenforced instead of refusing. The result reaches
// Prepare as Request.Compiled.
type Compiler interface {
	Compile(ctx context.Context, p Policy, accepted Capability) (any, error)
}

// Explainer is implemented by a provider that can say why it does not
// enforce some capabilities on this host (a kernel feature it lacks, a build
// without cgo, what its mechanism cannot see): the refusals of New
// (UnenforcedError, NoProviderError) quote it.
type Explainer interface {
	// Explain says why the provider lacks the capabilities of missing here,
	// for those it knows a cause of ("" when none).
	Explain(missing Capability) string
}

// explain asks p why it lacks the capabilities of m ("" when it cannot say).
func explain(p Provider, m []Requirement) string {
	e, ok := p.(Explainer)
	if !ok {
		return ""
	}
	var caps Capability
	for _, r := range m {
		caps |= r.Capability
	}
	return e.Explain(caps)
}

// Request is what a provider confines.
type Request struct {
	// Policy is the policy to enforce.
	Policy Policy
	// Path is the absolute path of the program; Args its argv (Args[0] is the name
	// the program was given).
	Path string
	Args []string
	// Env is exactly the program's environment.
	Env []string
	// Dir is the working directory ("" is the host's).
	Dir string
	// Limits are the resource limits to apply.
	Limits Limits
	// ExtraFiles are passed to the program as descriptors 3, 4, ...
	ExtraFiles []*os.File
	// Helper is the supervisor binary ("" is the host binary, see WithHelper).
	Helper string
	// Logger receives the provider's debug output.
	Logger *slog.Logger
	// Compiled is what the provider's Compile returned for this sandbox (nil when
	// the provider is not a Compiler).
	Compiled any
}

// Launch is a prepared process, not yet started. The Sandbox sets its standard
// input and output, then starts it.
type Launch struct {
	// Cmd is the process to start.
	Cmd *exec.Cmd
	// Start starts Cmd and returns the pid of the confined program once it runs. Nil
	// means Cmd.Start, the program being Cmd's process.
	Start func(ctx context.Context) (int, error)
	// Terminate kills the program's whole process tree. Nil means SIGKILL to Cmd's
	// process group.
	Terminate func() error
	// Signal delivers a signal to the program. Nil means Cmd's process.
	Signal func(os.Signal) error
	// Status returns the program's wait status once Cmd has exited. Nil means Cmd's
	// own status.
	Status func() (syscall.WaitStatus, error)
	// Cleanup releases what Prepare made (temporary files, helper processes). It
	// runs after Wait, or when Start fails.
	Cleanup func() error
}

// preference is the order in which os-sandbox=auto considers providers: the kernel
// providers, least privileged and cheapest first (landlock is the default), then
// subprocess, which confines nothing and so only covers a policy that grants
// everything. Providers not listed come before subprocess, by name.
var preference = []string{"landlock", "unshare", "bwrap", "firejail", "qemu"}

var registry struct {
	sync.RWMutex
	m map[string]Provider
}

// Register makes a provider available by its name. It panics if the provider is nil
// or its name is empty, "auto" or already registered.
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

// selectProvider resolves name ("auto" or a provider) for the requirements reqs.
func selectProvider(ctx context.Context, name string, reqs []Requirement) (Provider, error) {
	if name != "auto" {
		p, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w %q (registered: %s); import its package to register it", ErrUnknownProvider, name, registeredNames())
		}
		if err := p.Probe(ctx); err != nil {
			return nil, &ProbeError{Provider: name, Err: err}
		}
		if m := missing(reqs, p.Capabilities()); len(m) > 0 && name != "none" {
			return nil, &UnenforcedError{Provider: name, Missing: m, Why: explain(p, m)}
		}
		return p, nil
	}
	var verdicts []Verdict
	for _, p := range Providers() {
		if p.Name() == "none" {
			continue // never chosen unless named
		}
		if err := p.Probe(ctx); err != nil {
			verdicts = append(verdicts, Verdict{Provider: p.Name(), Probe: err})
			continue
		}
		if m := missing(reqs, p.Capabilities()); len(m) > 0 {
			verdicts = append(verdicts, Verdict{Provider: p.Name(), Missing: m, Why: explain(p, m)})
			continue
		}
		return p, nil
	}
	e := &NoProviderError{Verdicts: verdicts}
	for _, name := range preference {
		if _, ok := Lookup(name); !ok {
			e.NotLinked = append(e.NotLinked, name)
		}
	}
	return nil, e
}

func registeredNames() string {
	var names []string
	for _, p := range Providers() {
		names = append(names, p.Name())
	}
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}
