// Package supervise starts a program under a small supervisor process that owns the
// program's whole process tree.
//
// The supervisor is the host binary itself, re-executed through /proc/self/exe with a
// marker in argv[0] (or a dedicated helper binary that imports this package). It:
//
//   - becomes a child subreaper, so every orphaned descendant of the program is
//     re-parented to it and reaped (no zombie stays);
//   - watches the host: its parent-death signal fires when the host dies, and it
//     then kills the whole tree;
//   - starts the program in a process group of its own, with exactly the
//     environment, arguments and descriptors (0, 1, 2 and the caller's extra files)
//     of the spec, its resource limits and the stages that confine it (no-new-privs,
//     drop-capabilities, Landlock, seccomp), while the supervisor itself keeps its
//     freedom to wait for and kill the tree;
//   - forwards the host's ordinary signals to the program, and when the program ends
//     (or the host asks it to stop, or dies) kills every remaining descendant, waits
//     until none is left, and reports the program's exact wait status to the host
//     over a pipe.
//
// # Two supervisors, one protocol
//
// In a cgo build (the default) the supervisor is written in C (supervisor_linux.c
// and its sections, supervisor_wire_linux.c for the spec, supervisor_child_linux.c
// for the stages and the program's start, supervisor_ns_linux.c and
// supervisor_view_linux.c for the namespaces and the host view, which share
// supervisor_linux.h): a constructor recognises the marker at process start, before the Go runtime is
// initialised, does all of the above with plain system calls and exits, so the Go
// runtime of the host binary never starts. For any other argv[0] it returns at once
// (one string comparison). It starts the program with clone(CLONE_VM|CLONE_VFORK)
// and applies the limits and the stages in that child, between the clone and the
// execve. Its cost over a bare exec of the program is one exec of the host binary
// (the dynamic loader included) and a few dozen system calls; the Go runtime's start
// (threads, page faults of the runtime and the package initialisers) is gone.
//
// Without cgo (CGO_ENABLED=0) the supervisor is the Go one (helper.go): the
// package's init function takes the process over before the host's main runs. It
// applies the stages to one locked OS thread that forks the program (and is parked
// afterwards), and sets the resource limits after exec, on the program stopped by
// PTRACE_TRACEME, so that they do not bind the supervisor's own runtime.
//
// Both read the same spec (the wire format of wire.go, from a memfd), refuse the
// same malformed specs with the same messages, apply the same stages with the same
// error messages, and report the same lines on the status pipe:
//
//	N <pid>              namespaces and root ready, waiting for the go-ahead
//	                     (Namespaces.Wait only; pid: the inner supervisor's)
//	S <pid>              the program runs
//	E <errno> <message>  it could not be started (errno 0 when a stage or the spec
//	                     failed: a sandbox that cannot be set up is never taken for
//	                     a missing program); the supervisor then exits 127
//	X <wait status>      it ended; the supervisor exits with its code (128+signal
//	                     when a signal ended it)
//
// The supervisor's own environment is empty: the program's environment travels in
// the spec, so that its LD_PRELOAD and the like never reach the (unconfined)
// supervisor. The tests run every check against both supervisors.
//
// # Namespaces
//
// A spec with Namespaces (namespaces.go) runs the program in new user, mount,
// pid, network, IPC, UTS and cgroup namespaces. The supervisor the host started
// (with a cheap vfork, as always) clones an inner supervisor into them, writes its
// id maps from outside (as only a process outside a user namespace may when the
// sandbox's root is not the caller's own id), and from then on only relays the
// host's signals to it and mirrors its end: the host's own address space is never
// copied (a Go host would have to fork itself without vfork to clone into a new
// user namespace, which costs in proportion to its memory). The inner supervisor
// is pid 1 of the pid namespace, so the kernel kills every process of the sandbox
// when it ends (it dies with the outer one, which dies with the host); it builds
// the sandbox's root (a tmpfs holding bind mounts of host paths, masks, a new
// /proc...) from the spec's operations with the new mount API, pivots into it and
// seals it read-only before it starts the program. With Namespaces.Wait it
// reports "N <pid>" once everything is ready (its pid in the host: /proc/<pid>/ns
// are the sandbox's namespaces) and waits for a go-ahead byte on a "lifeline"
// pipe whose write end only the host holds (Handle.StartReady runs the caller's
// function in between: the network filter of the namespace providers). The "S"
// report then carries the program's pid as the host sees it (read from the host's
// /proc, kept open for that), the inner supervisor writes the "X" report, and the
// tree is killed with kill(-1). The C supervisor ignores the signals that
// processes of the sandbox send it (only the host, from outside the pid
// namespace, may ask it to stop). The Go supervisor does the same with the Go
// runtime: the inner supervisor is the binary started again (argv[0]
// pysandboxes-supervisor-go-ns).
//
// The host side is Command, which returns an *exec.Cmd for the supervisor and a
// Handle that reads its reports.
package supervise
