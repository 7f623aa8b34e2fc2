package driver

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"

	"github.com/pysandboxes/pysandboxes/policy"
)

// Provider is an OS sandbox: it turns a policy and a command into a process that
// the kernel confines. A provider registers itself with Register from its
// package's init function (package pysandboxes imports the built-in ones), and
// is chosen by the policy's os-sandbox= rule or by pysandboxes.WithProvider.
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

// Compiler is implemented by providers that translate a policy once per sandbox
// instead of at every start (for example, to walk the exposed directories).
// The sandbox calls Compile once it has chosen the provider; an error refuses
// the sandbox, and must name the rule it cannot enforce. accepted holds the
// capabilities the caller accepted as not enforced
// (pysandboxes.AcceptUnenforced): a provider may then run with that part of the
// policy unenforced instead of refusing. The result reaches Prepare as
// Request.Compiled.
type Compiler interface {
	Compile(ctx context.Context, p Policy, accepted Capability) (any, error)
}

// Explainer is implemented by a provider that can say why it does not
// enforce some capabilities on this host (a kernel feature it lacks, a build
// without cgo, what its mechanism cannot see): the refusals of the sandbox
// (pysandboxes.UnenforcedError, NoProviderError) quote it.
type Explainer interface {
	// Explain says why the provider lacks the capabilities of missing here,
	// for those it knows a cause of ("" when none).
	Explain(missing Capability) string
}

// Policy is what a provider reads of a policy: the OS view of the rules.
// *policy.Policy implements it.
type Policy interface {
	// Environ is the program's whole environment, "KEY=value" strings.
	Environ() []string
	// Exposes are the expose-ro= and expose-rw= directories, deepest first.
	Exposes() []policy.Expose
	// Ignores are the ignore= rules.
	Ignores() []policy.Ignore
	// Network holds the net= rules and the pinned host names (never nil).
	Network() *policy.Network
	// ProviderParams are the "<provider>.<key>=" lines for one provider.
	ProviderParams(provider string) []policy.Param
}

var _ Policy = (*policy.Policy)(nil)

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
	// Channel, when not 0, is the descriptor (3 or more) of one of ExtraFiles:
	// a socket that carries requests whose answers the caller waits for, and
	// that the caller closes whole (once it has shut down its writing side, it
	// reads nothing more from it). A provider may carry it on a faster path
	// than its other descriptors (qemu: a virtio-serial port of its own, which
	// cannot relay a shutdown of one direction alone).
	Channel int
	// Helper is the supervisor binary ("" is the host binary, see
	// pysandboxes.WithHelper).
	Helper string
	// Logger receives the provider's debug output.
	Logger *slog.Logger
	// Compiled is what the provider's Compile returned for this sandbox (nil when
	// the provider is not a Compiler, or for a request not made by a sandbox).
	Compiled any
}

// Launch is a prepared process, not yet started. The sandbox sets its standard
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
