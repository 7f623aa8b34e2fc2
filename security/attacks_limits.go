package security

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"golang.org/x/sys/unix"
)

// The attacks on resources and on the process tree. The tree, the context and the
// output limit are every provider's supervisor's (no capability); the kernel
// limits need rlimits.

var forkBomb = &Attack{
	Name: "fork-bomb", Capability: 0,
	Summary:   "a bounded fork bomb (a tree of 2,047 shells and sleeps) under a 2 s timeout: no process of it may survive Wait",
	exclusive: true,
	setup: func(e *env) *plan {
		return &plan{
			rules:    []string{"expose-ro=/usr/bin"},
			argv:     []string{"/bin/sh", "-c", `b() { if [ "$1" -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; printf x; exec sleep 1000; }; b 10`},
			timeout:  2 * time.Second,
			warmVM:   true,
			ownsTree: true,
			check: func(r *runResult) (outcome, string) {
				left := killMarked(e.mark)
				// Each process of the tree prints one "x" once it runs (reading
				// /proc during the storm would block on the forks).
				started := bytes.Count(r.out, []byte("x"))
				switch {
				case r.watchdog:
					return outThrough, "the tree was not ended at the timeout"
				case len(left) > 0:
					return outThrough, fmt.Sprintf("%d of the tree's %d processes left after Wait", len(left), started)
				case !errors.Is(r.err, context.DeadlineExceeded):
					return outUnclear, fmt.Sprintf("Wait = %v, want the timeout (output: %s)", r.err, excerpt(r.out, 300))
				case started < 16:
					return outUnclear, fmt.Sprintf("the bomb did not go off: %d processes started", started)
				}
				return outBlocked, fmt.Sprintf("Wait returned the timeout after %v; none of the tree's %d processes left",
					r.elapsed.Round(time.Millisecond), started)
			},
		}
	},
}

var orphans = &Attack{
	Name: "orphans-after-exit", Capability: 0,
	Summary: "leave background and setsid daemons (double fork) behind when the program exits",
	setup: func(e *env) *plan {
		return &plan{
			rules:    []string{"expose-ro=/usr/bin"},
			argv:     []string{"/bin/sh", "-c", `(setsid sleep 1000 >/dev/null 2>&1 &); sleep 1000 >/dev/null 2>&1 & echo started`},
			ownsTree: true,
			check: func(r *runResult) (outcome, string) {
				left := killMarked(e.mark)
				switch {
				case len(left) > 0:
					return outThrough, fmt.Sprintf("%d daemons left after Wait", len(left))
				case r.err != nil || string(r.out) != "started\n":
					return outUnclear, fmt.Sprintf("Wait = %v, output %q", r.err, excerpt(r.out, 300))
				}
				return outBlocked, "no daemon left after Wait"
			},
		}
	},
}

var memoryBomb = &Attack{
	Name: "memory-bomb", Capability: pysandboxes.CapResourceLimits, Destructive: true,
	Summary: "bytearray(10**10) under Limits{AddressSpace: 512 MiB}",
	setup: func(e *env) *plan {
		return &plan{
			limits: pysandboxes.Limits{AddressSpace: 512 << 20},
			argv: e.py(`
try:
    b = bytearray(10**10)
    print("alloc OK", len(b))
except MemoryError:
    print("alloc MemoryError")
`),
			check: probes(deny("alloc", "MemoryError")),
		}
	},
}

// spin is a Python program that spins forever.
func (e *env) spin() []string {
	return []string{e.python(), "-I", "-c", "while True: pass"}
}

var cpuTimeout = &Attack{
	Name: "cpu-timeout", Capability: 0,
	Summary: "spin past a 1 s context timeout",
	setup: func(e *env) *plan {
		return &plan{
			argv:    e.spin(),
			timeout: time.Second,
			warmVM:  true,
			check: func(r *runResult) (outcome, string) {
				ee := exitError(r.err)
				switch {
				case r.watchdog:
					return outThrough, "not killed at the timeout"
				case ee == nil || !errors.Is(r.err, context.DeadlineExceeded) || !ee.Status.Signaled():
					return outUnclear, fmt.Sprintf("Wait = %v, want an ExitError for the timeout, killed by a signal", r.err)
				case r.elapsed > 6*time.Second:
					return outThrough, fmt.Sprintf("killed only after %v", r.elapsed)
				}
				return outBlocked, fmt.Sprintf("killed by %s after %v (context.DeadlineExceeded)", unix.SignalName(ee.Status.Signal()), r.elapsed.Round(time.Millisecond))
			},
		}
	},
}

var cpuRlimit = &Attack{
	Name: "cpu-rlimit", Capability: pysandboxes.CapResourceLimits,
	Summary: "spin past Limits{CPUTime: 1 s} (30 s timeout)",
	setup: func(e *env) *plan {
		return &plan{
			argv:   e.spin(),
			limits: pysandboxes.Limits{CPUTime: time.Second},
			// The limit counts CPU time, not wall time: on a loaded machine one
			// second of CPU can take many seconds to use up. The timeout only
			// bounds the run (a quiet machine ends it in about 1.3 s).
			timeout: 30 * time.Second,
			check: func(r *runResult) (outcome, string) {
				ee := exitError(r.err)
				switch {
				case r.watchdog || errors.Is(r.err, context.DeadlineExceeded):
					return outThrough, fmt.Sprintf("still spinning at the timeout (%v)", r.err)
				case ee == nil || ee.Err != nil || !ee.Status.Signaled():
					return outUnclear, fmt.Sprintf("Wait = %v, want the program killed by SIGXCPU or SIGKILL", r.err)
				case ee.Status.Signal() != syscall.SIGXCPU && ee.Status.Signal() != syscall.SIGKILL:
					return outUnclear, fmt.Sprintf("killed by %v, want SIGXCPU or SIGKILL", ee.Status.Signal())
				}
				return outBlocked, fmt.Sprintf("killed by %s after %v", unix.SignalName(ee.Status.Signal()), r.elapsed.Round(time.Millisecond))
			},
		}
	},
}

var fdExhaustion = &Attack{
	Name: "fd-exhaustion", Capability: pysandboxes.CapResourceLimits,
	Summary: "open descriptors (up to 5,000) under Limits{OpenFiles: 64}",
	setup: func(e *env) *plan {
		return &plan{
			limits: pysandboxes.Limits{OpenFiles: 64},
			argv: e.py(`
fds = []
try:
    while len(fds) < 5000:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    print("open OK", len(fds))
except OSError as e:
    print("open", errno.errorcode.get(e.errno), len(fds))
`),
			check: func(r *runResult) (outcome, string) {
				l, ok := parseLines(r.out)["open"]
				n, err := strconv.Atoi(l.rest)
				switch {
				case r.err != nil || !ok || err != nil:
					return outUnclear, fmt.Sprintf("Wait = %v, output %s", r.err, excerpt(r.out, 300))
				case l.status == "OK" || n > 64:
					return outThrough, fmt.Sprintf("%d descriptors opened (%s)", n, l.status)
				case l.status != "EMFILE":
					return outUnclear, "open failed with " + l.status
				}
				return outBlocked, fmt.Sprintf("EMFILE after %d descriptors", n)
			},
		}
	},
}

var giantOutput = &Attack{
	Name: "giant-output", Capability: 0,
	Summary: "write 64 MiB under Limits{Output: 1 MiB}",
	setup: func(e *env) *plan {
		return &plan{
			limits: pysandboxes.Limits{Output: 1 << 20},
			argv: e.py(`
chunk = b"x" * 65536
for _ in range(1024):
    sys.stdout.buffer.write(chunk)
`),
			check: func(r *runResult) (outcome, string) {
				switch {
				case r.total > 1<<20:
					return outThrough, fmt.Sprintf("%d bytes of output kept", r.total)
				case !errors.Is(r.err, pysandboxes.ErrOutputLimit):
					return outUnclear, fmt.Sprintf("Wait = %v, want ErrOutputLimit", r.err)
				}
				return outBlocked, fmt.Sprintf("ErrOutputLimit, %d bytes kept", r.total)
			},
		}
	},
}

// limitAttacks are the attacks on resources and on the process tree.
var limitAttacks = []*Attack{forkBomb, orphans, memoryBomb, cpuTimeout, cpuRlimit, fdExhaustion, giantOutput, hostDeath}
