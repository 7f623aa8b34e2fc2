// Package bwrap is the bubblewrap OS provider: each program runs in namespaces
// of its own (user, mount, pid, ipc, uts, cgroup, network) that bwrap sets up
// from the policy, with no capability and under the seccomp filter of package
// internal/seccomp. It needs bubblewrap 0.8 or later and user namespaces, no
// privilege: it works for an unprivileged user, not in a container whose seccomp
// profile refuses user namespaces or mount.
//
// Package pysandboxes links it (importing this package registers it), and
// os-sandbox=bwrap selects it.
//
// # How it confines
//
// The program starts under the supervisor (package internal/supervise): the
// supervisor starts bwrap with the sandbox's resource limits and no_new_privs,
// owns the process tree and kills all of it when the program ends, the context
// is done or the host dies (bwrap also runs with --die-with-parent). bwrap reads
// its options from a descriptor (--args), so that the environment's values never
// show on a host process's command line, and the BPF program from another
// (--seccomp). The namespaces: --unshare-user (the caller's uid is mapped to
// itself, and --disable-userns forbids nested user namespaces), --unshare-ipc,
// --unshare-pid, --unshare-net, --unshare-uts, --unshare-cgroup-try; then
// --cap-drop ALL, so the program holds no capability in any namespace.
//
// # Translation of the policy
//
// Compile translates the policy once per sandbox; Prepare adds what each program
// needs to run (package internal/hostview plans the file system). The steps the
// two wrapper providers (bwrap, firejail) take alike are package
// internal/wrapper's.
//
//   - The root is an empty tmpfs, read-only once built (--remount-ro /). The
//     sandbox has its own /proc (its processes only) and a minimal /dev (null,
//     zero, full, random, urandom, tty, pts, a private shm); an expose= rule for
//     /proc or /dev is not needed and the host's is never shown.
//   - expose-ro= is --ro-bind, expose-rw= is --bind, parents first, so a
//     read-write directory inside a read-only one is mounted over it, and a
//     read-only one inside a read-write one too (the deepest rule wins). The
//     host's /run is never shown implicitly; /tmp is not there unless exposed
//     (bwrap.tmpfs=/tmp gives a private one). Nothing is writable but the
//     expose-rw= directories and the private /dev/shm.
//   - What the program needs to run (internal/needs: the program, its ELF loader
//     and libraries, /etc/ld.so.cache, the interpreter of a "#!" script, a Python
//     interpreter's directories), plus env(1) which starts it, is shown
//     read-only. A directory under /usr that holds three or more needed files is
//     shown whole (bind mounts one by one cost bwrap about a quarter of a
//     millisecond each, and a Python interpreter needs some two hundred
//     libraries): the other files of such a directory (/usr/lib/x86_64-linux-gnu
//     for a Python program, say) are readable too. Files elsewhere, /etc above
//     all, are shown one by one. The symbolic links met on the way are
//     recreated: the root links of a merged /usr (/bin, /lib, /lib64, /sbin), the
//     program's own path, PT_INTERP, the libraries' sonames, "#!" interpreters.
//     When a net= rule allows traffic, the resolver's configuration and the CA
//     certificate stores are shown too.
//   - ignore=: the exposed directories are walked (bounded: 10,000 entries each)
//     at every start, and absolute patterns are matched anywhere the sandbox
//     shows: an ignored file is covered by the host's /dev/null on a nodev
//     mount (open fails with EACCES; unlink and rename fail with EBUSY), an
//     ignored directory by an empty tmpfs of mode 0000 (or 0111 when a directory
//     exposed beneath it must stay reachable). Other hard links to an ignored
//     file in the exposed directories are masked too, and an ignored symbolic
//     link is masked at its target. The name stays listed; the content never
//     shows. A directory too large to walk refuses the start unless the caller
//     accepted hide unenforced; an ignore= rule that hides what the program needs
//     is an error naming the rule.
//   - The environment is exactly the request's (the policy's): --clearenv and
//     one --setenv per variable; bwrap sets PWD itself, so the program starts
//     through env(1) (-u PWD, or the policy's PWD). bwrap 0.8 has no --argv0: the
//     program's argv[0] is its path.
//   - The network: no net= rule gives a network namespace with loopback only:
//     the host's listeners, its abstract Unix sockets and any other address are
//     out of reach. With net= rules, the network filter (internal/netfilter)
//     compiles them (a rule it cannot serve, such as an IPv6 destination, is
//     refused with its file(line)); when they let traffic out or forward ports
//     in, bwrap holds the program (--block-fd) while the host sets the filter up
//     in the sandbox's namespaces (nftables, slirp4netns; found through
//     --info-fd, once bwrap's first process waits on the block descriptor, its
//     set-up done), and releases it only then; a failure kills the sandbox
//     before the program runs. The filter's hosts file and resolver are bound on
//     /etc/hosts and /etc/resolv.conf (--ro-bind-data). DNS to the sandbox's
//     resolver is let through by the filter unless a DENY rule refuses it (UDP
//     needs a UDP rule: seccomp refuses UDP sockets without one).
//   - Listening: Landlock (ABI 4 or later) handles TCP bind for bwrap and the
//     program, with no file right (bwrap's mounts are not affected): only the
//     ports of ALLOW IN rules can be bound (port 0: any ephemeral port), minus
//     DENY IN rules for every address; seccomp refuses MPTCP sockets, which go
//     around Landlock's rules. Without Landlock's TCP rules or seccomp,
//     tcp-ports is not claimed.
//   - seccomp: internal/seccomp's filter, through --seccomp: UDP sockets refused
//     unless a net= rule allows UDP, raw and packet sockets, mount, namespaces,
//     ptrace, bpf, keyctl, io_uring and the rest of its list refused (EPERM).
//     Unix sockets are allowed: the host's named sockets are not in the file
//     system and its abstract sockets belong to another network namespace.
//   - Resource limits: set by the supervisor on bwrap, inherited by the program.
//   - bwrap.<opt>= lines pass bwrap options through, in order (a value with
//     several arguments separates them by spaces): --hostname, --tmpfs, --dir,
//     --symlink, --remount-ro, --mqueue, --chdir, --new-session, --as-pid-1,
//     --uid, --gid, --perms and --size (before the option they modify),
//     --cap-drop, and the --unshare-* and --die-with-parent the provider sets
//     anyway. Anything that would show host paths (--bind, --ro-bind...), change
//     the environment, share the network, add a capability, take a descriptor,
//     change a host file's mode (--chmod), or that the installed bwrap does not
//     list in its --help, is refused with the line's file(line).
//   - Signals: Cmd.Signal reaches the program itself (bwrap's --info-fd names the
//     sandbox's first process; the program is its child). A program killed by a
//     signal N ends with status 128+N, as bwrap reports it.
//
// # What it enforces
//
//	capability         with seccomp         without seccomp (CGO_ENABLED=0)
//	env                yes (needs env(1))   yes
//	files-read         yes                  yes
//	files-write        yes                  yes
//	hide (ignore=)     yes (masked)         yes
//	unix-sockets       yes                  yes
//	tcp-ports          yes (Landlock ABI 4) no (MPTCP goes around Landlock)
//	net-hosts, udp     yes (internal/netfilter: root, nftables, slirp4netns)
//	udp-deny           yes                  yes (nothing is reachable but loopback and the resolver)
//	raw-sockets        yes                  yes (no capability)
//	signals, ptrace    yes (pid namespace)  yes
//	rlimits            yes                  yes
//	seccomp            yes                  no
//	process-isolation  yes                  yes
//	unprivileged       yes                  yes
//	no-privileges      yes                  yes
//
// Startup: bwrap adds a few milliseconds over the supervisor (see
// BenchmarkBwrapTrue); env(1) adds one exec.
package bwrap
