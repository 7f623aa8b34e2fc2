package driver

import "time"

// Limits are resource limits for a sandboxed program and its descendants. A zero
// field means no limit. Every provider either applies them (CapResourceLimits) or
// refuses to start.
type Limits struct {
	// CPUTime bounds the processor time of each process (RLIMIT_CPU, rounded up to
	// whole seconds): SIGXCPU, then SIGKILL.
	CPUTime time.Duration
	// AddressSpace bounds the virtual memory of each process in bytes (RLIMIT_AS):
	// allocations beyond it fail.
	AddressSpace uint64
	// OpenFiles bounds the open descriptors of each process (RLIMIT_NOFILE).
	OpenFiles uint64
	// Processes bounds the processes of the user (RLIMIT_NPROC). The kernel does not
	// apply it to root.
	Processes uint64
	// FileSize bounds the size of a file a process writes, in bytes (RLIMIT_FSIZE).
	FileSize uint64
	// Output bounds the bytes the program writes to Stdout and Stderr together; past
	// it the whole tree is killed and Wait reports the sandbox's output-limit error.
	// The host enforces it, whatever the provider.
	Output int64
}

// Kernel reports whether l holds a limit the kernel applies (every field but
// Output): what needs CapResourceLimits.
func (l Limits) Kernel() bool {
	return l.CPUTime > 0 || l.AddressSpace > 0 || l.OpenFiles > 0 || l.Processes > 0 || l.FileSize > 0
}
