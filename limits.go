package pysandboxes

import (
	"time"

	"github.com/pysandboxes/pysandboxes/internal/supervise"
	"golang.org/x/sys/unix"
)

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
	// it the whole tree is killed and Wait reports ErrOutputLimit. The host enforces
	// it, whatever the provider.
	Output int64
}

// rlimits returns the kernel resource limits of l, or nil when there is none.
func (l Limits) rlimits() []supervise.Rlimit {
	var out []supervise.Rlimit
	add := func(res int, v uint64) {
		if v > 0 {
			out = append(out, supervise.Rlimit{Resource: res, Value: v})
		}
	}
	if l.CPUTime > 0 {
		// The soft limit raises SIGXCPU; the hard one, a second later, SIGKILL.
		secs := uint64((l.CPUTime + time.Second - 1) / time.Second)
		out = append(out, supervise.Rlimit{Resource: unix.RLIMIT_CPU, Value: secs, Hard: secs + 1})
	}
	add(unix.RLIMIT_AS, l.AddressSpace)
	add(unix.RLIMIT_NOFILE, l.OpenFiles)
	add(unix.RLIMIT_NPROC, l.Processes)
	add(unix.RLIMIT_FSIZE, l.FileSize)
	return out
}
