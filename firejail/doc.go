// Package firejail is the firejail OS provider: each program runs in a firejail
// sandbox (mount, pid and network namespaces, no capability, no_new_privs,
// firejail's seccomp and protocol filters) whose file system is built from the
// policy. firejail is a setuid-root program: it runs for root, or for the users
// /etc/firejail/firejail.users lists; not in a container, where it may decide it
// is already sandboxed and run programs without isolation (Probe runs it once
// and checks that it made a pid namespace). It needs firejail 0.9.72 or later.
//
// Package pysandboxes links it (importing this package registers it), and
// os-sandbox=firejail selects it.
//
// # How it confines
//
// The program starts under the supervisor (package internal/supervise), which
// starts firejail with the sandbox's resource limits, owns the process tree and
// kills all of it when the program ends, the context is done or the host dies.
// firejail reads its options from a profile passed as a descriptor
// (--profile=/proc/self/fd/N; it takes at most 127 arguments), with:
// --caps.drop=all, --nonewprivs, --seccomp (firejail's default list: mount,
// ptrace, bpf, keyctl, kernel modules, ... plus io_uring and the rest of the
// provider's list that firejail's default lacks), --seccomp.block-secondary
// (no 32-bit system calls), --restrict-namespaces, --protocol=unix,inet,inet6,
// netlink, --private-dev (and a private /dev/shm), no sound, video, 3D, DVD, TV,
// U2F or input devices, --nogroups, --deterministic-shutdown (when the program
// ends, its orphans are killed and firejail ends with its status).
//
// # Translation of the policy
//
// Compile translates the policy once per sandbox; Prepare adds what each program
// needs to run. The steps the two wrapper providers (bwrap, firejail) take alike
// are package internal/wrapper's.
//
//   - The file system: the whole tree read-only (--read-only=/). Every entry of
//     /, of /usr and of /run (but firejail's own) is a unit: a unit that holds
//     nothing the sandbox shows is blacklisted (an empty, read-only directory
//     whose entries are unreachable); one that holds some is restricted to
//     them (whitelist, on a read-only tmpfs); one inside an exposed directory is
//     left whole. Each exposed directory then gets --read-only= or
//     --read-write=, parents first (the deepest rule wins). /proc is the
//     sandbox's own; /sys is shown whole or not at all; of /dev only /dev/shm
//     can be exposed (--keep-dev-shm); of /run only whole /run/NAME directories.
//     There is no /tmp unless exposed (firejail.private-tmp= gives a private
//     one).
//   - What the program needs to run, and env(1) which starts it, is whitelisted
//     read-only as package internal/hostview plans it (see package bwrap for the
//     rules: system directories under /usr holding three or more needed files
//     whole, the rest file by file, the links on the way). Instead of
//     --private-etc (which copies files at every start), the needed files of
//     /etc are whitelisted.
//   - ignore=: the exposed directories are walked at every start (bounded), and
//     each ignored path is blacklisted: as seen by a root program, an ignored
//     file reads empty and cannot be written (EACCES), removed or renamed
//     (EBUSY); an ignored directory lists empty and its entries are
//     unreachable (EACCES). The content never shows. Other hard links and the
//     targets of ignored symbolic links are masked too; an ignore= rule that
//     hides what the program needs is an error naming the rule.
//   - The environment is exactly the request's. The variables reach the program
//     through firejail's own environment (never on a command line), except
//     those that would act on firejail itself, a root process (LD_*, the C
//     library's, FIREJAIL_*), and those firejail sets itself (SHELL, container):
//     env(1) sets these inside the sandbox, and removes the variables firejail
//     adds (PATH, container, QT_*, ...). What firejail adds and changes is
//     measured by one firejail run per set of variable names, not assumed.
//   - The network: no net= rule gives --net=none, loopback only. With net=
//     rules, the network filter (internal/netfilter) compiles them (a rule it
//     cannot serve, such as an IPv6 destination, is refused with its file(line));
//     when they let traffic out or forward ports in, the host makes a named
//     network namespace (netfilter.NewNamed), sets the filter up in it
//     (nftables, slirp4netns) before firejail starts, and firejail joins it
//     (--netns); a failure means firejail never starts. The filter's hosts file
//     is given through a descriptor (--hosts-file) and its resolver by --dns
//     (firejail cannot write "options use-vc": when a rule refuses UDP DNS, the
//     sandbox names no resolver). firejail cannot refuse UDP sockets: without a
//     UDP rule a datagram reaches nothing but the sandbox's own loopback and,
//     when rules let traffic out, the resolver (DNS, unless a DENY rule refuses
//     it).
//   - Listening: when firejail runs as root and the kernel has Landlock ABI 4,
//     the supervisor restricts firejail (and so the program) with Landlock's TCP
//     bind rules only: only the ports of ALLOW IN rules can be bound (port 0: any
//     ephemeral port). firejail cannot refuse MPTCP sockets, which go around
//     them; such a listener is still out of reach from outside the sandbox's
//     network namespace.
//   - Resource limits: set by the supervisor on firejail, inherited by the
//     program. firejail.rlimit-as/-cpu/-fsize/-nofile/-nproc/-sigpending= add
//     firejail's own, and are refused when they would raise the sandbox's.
//   - firejail.<key>= lines pass these firejail options through: seccomp (more
//     system calls to refuse), seccomp.keep, seccomp.32, seccomp.block-secondary,
//     seccomp-error-action (kill or an errno), memory-deny-write-execute, the
//     rlimit-* options, nice (0 to 19), hostname, nogroups, noexec,
//     deterministic-exit-code, private-tmp, ipc-namespace. Anything that would
//     change what the sandbox shows of the host, its network or environment, add
//     a capability, weaken the seccomp filter (seccomp.drop, allow-debuggers,
//     seccomp-error-action=log), or that the installed firejail does not know,
//     is refused with the line's file(line).
//   - Signals: Cmd.Signal reaches the program itself (firejail would forward a
//     SIGTERM, then end itself by it and lose the program's status).
//
// # What it enforces
//
//	capability         enforced
//	env                yes (needs env(1))
//	files-read         yes
//	files-write        yes
//	hide (ignore=)     yes (blacklisted: empty, never the content)
//	unix-sockets       yes (no host socket in the file system; own network namespace)
//	tcp-ports          yes as root with Landlock ABI 4 (MPTCP listeners: see above)
//	net-hosts, udp     yes (internal/netfilter: root, nftables, slirp4netns)
//	udp-deny           yes (nothing is reachable but loopback and the resolver)
//	raw-sockets        yes (no capability; packet sockets refused by the protocol filter)
//	signals, ptrace    yes (pid namespace, seccomp)
//	rlimits            yes
//	seccomp            yes (firejail's filter)
//	process-isolation  yes
//	unprivileged       no (setuid root)
//	no-privileges      yes
//
// Startup: firejail costs tens of milliseconds per start whatever the program
// (see BenchmarkFirejailTrue), several times bwrap's.
package firejail
