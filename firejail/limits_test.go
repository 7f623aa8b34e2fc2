package firejail_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// TestResourceLimitsApplied: the sandbox's resource limits reach the program
// (through firejail, which the supervisor starts with them): the kernel reports them,
// and an allocation beyond the address-space limit fails.
func TestResourceLimitsApplied(t *testing.T) {
	sb := sandbox(t, nil, pysandboxes.WithLimits(pysandboxes.Limits{
		AddressSpace: 512 << 20, OpenFiles: 64, FileSize: 1 << 20, CPUTime: 30 * time.Second,
	}))
	out := py(t, sb, `
import resource
for name in ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU"):
    print(name, *resource.getrlimit(getattr(resource, name)))
try:
    b = bytearray(1 << 30)
    print("alloc OK")
except MemoryError:
    print("alloc MemoryError")
`)
	for _, want := range []string{"RLIMIT_AS 536870912 536870912", "RLIMIT_NOFILE 64 64", "RLIMIT_FSIZE 1048576 1048576",
		"RLIMIT_CPU 30 31", "alloc MemoryError"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
