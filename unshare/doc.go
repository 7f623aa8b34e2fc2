// Package unshare is the unshare OS provider: the program runs in Linux
// namespaces of its own (user, mount, pid, network, IPC, UTS, cgroup), under a
// root that holds nothing but what the policy exposes and what the program needs
// to run, with no capability, no_new_privs and a seccomp filter. It is native: no
// util-linux binary (unshare, setpriv, chroot) and no setuid helper is involved;
// it works as root and as an unprivileged user wherever user namespaces are
// allowed.
//
// Package pysandboxes links it (importing this package registers it), and
// os-sandbox=unshare (or auto, which prefers
// landlock, then unshare) selects it.
//
// # How it confines
//
// The program starts under the supervisor of package internal/supervise (the host
// binary re-executed; its C version runs before the Go runtime starts). The
// supervisor clones an inner supervisor into new namespaces and maps the
// sandbox's root (uid 0, gid 0) to the caller's uid and gid, or, for a root
// caller, to the ids of unshare.uid= and unshare.gid= (then without the host's
// supplementary groups); the host's own memory is never copied. The inner
// supervisor is pid 1 of the new pid namespace: when it ends, for whatever
// reason, the kernel kills every process of the sandbox; it dies with the outer
// one, which dies with the host (parent-death signals), and the context's end or
// Cmd.Terminate make it kill the tree.
//
// Before it starts the program, the inner supervisor builds the sandbox's root
// with the new mount API (open_tree, mount_setattr, move_mount, fsopen, fsmount:
// every host path opened without following symbolic links, so a tree that
// changed since the plan fails the start), then pivots into it, detaches the
// host's tree, makes the root read-only, forbids user namespaces below its own
// (user.max_user_namespaces=0) and brings the loopback interface up. The root:
//
//   - a tmpfs, read-only once built, holding only the directories on the way to
//     what follows (mode 0111: they can be crossed, not listed, so a program
//     that climbs out of an exposed directory finds nothing to list), the
//     merged-/usr links of the host (/bin, /lib, /lib64, /sbin -> usr/...) and
//     /etc/hosts (localhost) unless the policy exposes the host's;
//   - the expose-ro= directories bind-mounted read-only, the expose-rw= ones
//     read-write, recursively, all nosuid and nodev. Nothing else of the host is
//     there: a path the policy does not expose does not exist (ENOENT), writes
//     outside expose-rw fail with EROFS, even for the sandbox's root user;
//   - what the program needs to run, bound read-only file by file (package
//     internal/needs): the program, its ELF loader and shared libraries (by their
//     canonical paths, with the symbolic links the loader goes through recreated),
//     /etc/ld.so.cache, the interpreter of a "#!" script, a Python interpreter's
//     standard library and site directories and the libraries of their extension
//     modules; when a net= rule lets traffic out, the resolver's configuration and
//     the CA certificate stores (never /etc/ssl/private). Name the real
//     interpreter (/usr/bin/python3), not a version manager's shim;
//   - /proc: a new procfs of the sandbox's pid namespace (pid 1 is the
//     supervisor, no host process is there; the host's /proc is never exposed,
//     an expose rule under /proc is ignored with a warning);
//   - /dev: null, zero, full, random, urandom and tty bound from the host, fd,
//     stdin, stdout and stderr links to /proc/self, and a private /dev/shm tmpfs
//     (64 MiB, unshare.shm-size=); no /sys, no host /run (when the policy exposes
//     "/", an empty read-only /run covers the host's unless a rule names /run);
//   - /tmp: none unless the policy exposes it. expose-rw=/tmp gives a private,
//     writable tmpfs (256 MiB, unshare.tmp-size=), never the host's /tmp and its
//     sockets and files; unshare.host-tmp=yes binds the host's /tmp instead.
//     Directories exposed beneath /tmp are bound as usual.
//
// The working directory is the caller's (Cmd.Dir, or the host's) when the
// sandbox sees that path, "/" otherwise.
//
// Then the program is started from pid 1 with an empty capability bounding set
// and no capability, no_new_privs, the resource limits and the seccomp filter of
// package internal/seccomp (AF_UNIX allowed: the private network namespace scopes
// abstract sockets, and no host socket is in the root unless exposed; UDP refused
// unless a net= rule allows it, MPTCP, raw and packet sockets, ptrace, mount,
// namespaces, bpf, keyctl, io_uring and the like refused). Any failure fails the
// start, and the program never runs.
//
// # ignore=
//
// Every path an ignore= rule hides that the sandbox would see is masked: an empty
// file or directory of mode 0 is bind-mounted over it, read-only, so reading it
// fails with EACCES (and nothing can change, remove or rename it: EROFS, EBUSY).
// The ignored paths are looked for at every start: relative patterns in the
// exposed directories (bounded: 10,000 entries per exposed directory, beyond
// which the rule is refused unless the caller accepts CapHide), absolute patterns
// anywhere; other hard links to an ignored file found in the exposed directories
// are masked too, and an ignored symbolic link masks its target when the sandbox
// sees it. A directory exposed beneath an ignored one stays reachable (the
// deepest exposed directory decides): the ignored directory is then an empty
// tmpfs of mode 0111 through which only those directories can be reached (the
// rest of it is absent). A file that appears in an exposed directory while the
// program runs is not masked until the next start.
//
// # Network
//
// The sandbox has a network namespace of its own whose only interface is the
// loopback one: the host's listeners (on 127.0.0.1 too) and abstract Unix sockets
// are out of reach, no route leads out. net= DENY rules need nothing more.
//
// With net= ALLOW rules, the network filter of package internal/netfilter is set
// up in that namespace before the program starts (the supervisor reports the
// namespaces ready and waits; Launch.Start runs netfilter's Setup, then lets the
// program go; the session ends at Cleanup, after the whole tree is gone): an
// nftables table built from the rules (proto, address or network, ports,
// direction; DENY before ALLOW; everything else refused), slirp4netns as the only
// way out, DNS only to the sandbox's resolver, the host's 127.0.0.1 only on the
// ports a rule allows, IN rules on 127.0.0.1 forwarded from the host's loopback.
// The filter's /etc/hosts (the pinned names, with exactly their checked
// addresses) and /etc/resolv.conf replace the host's in the sandbox's root. As
// root the filter is set up from the host process; without privileges through
// netfilter's helper in the sandbox's user namespace. A rule the filter cannot
// serve (an IPv6-only destination, a loopback address other than 127.0.0.1) is
// refused by New, naming it; where the filter cannot work (no slirp4netns, no
// /dev/net/tun, no nftables), every ALLOW rule is.
//
// The seccomp filter refuses UDP sockets unless a rule allows UDP (as the landlock
// provider: a policy without a UDP rule means no UDP at all); the resolver is then
// asked over TCP (resolv.conf "options use-vc"). TCP binds are refused on every
// port no IN rule allows (a Landlock ruleset that handles only the TCP bind right,
// from Landlock ABI 4): nftables sees packets, not sockets, so without it a
// program could listen on its own network (which nothing outside reaches unless
// forwarded). Traffic on the sandbox's own loopback is not filtered: a datagram
// to a port of 127.0.0.1 that no rule sends to the host is delivered to the
// sandbox itself (to nobody).
//
// # What it enforces
//
//	capability         enforced
//	env                yes
//	files-read         yes (a root of its own)
//	files-write        yes (read-only binds and root)
//	hide (ignore=)     yes (masks)
//	unix-sockets       yes (private network namespace, no host socket unless exposed)
//	tcp-ports          yes (private network; the network filter for ALLOW rules;
//	                   binds by Landlock from ABI 4)
//	net-hosts          with the network filter (else ALLOW rules are refused)
//	udp (by port)      with the network filter
//	udp-deny           yes (private network, and seccomp)
//	raw-sockets        yes (no capability, and seccomp)
//	signals, ptrace    yes (pid namespace)
//	rlimits            yes
//	seccomp            yes with cgo (libseccomp); no with CGO_ENABLED=0
//	process-isolation  yes (pid namespace)
//	unprivileged       yes where unprivileged users may make user namespaces
//	no-privileges      yes
//
// # Parameters
//
// unshare.uid=N and unshare.gid=N (root only: the host ids the sandbox's root
// stands for; the default is the caller's), unshare.host-tmp=yes|no,
// unshare.tmp-size=SIZE and unshare.shm-size=SIZE (64m, 1g...). Any other
// unshare.* key is an error.
//
// # Requirements
//
// Linux 5.12 or later (the new mount API) with user, mount, pid, network, IPC,
// UTS and cgroup namespaces; for an unprivileged caller,
// kernel.unprivileged_userns_clone=1 where that sysctl exists,
// user.max_user_namespaces above 0, and no AppArmor restriction of unprivileged
// user namespaces. Inside a container it needs what bwrap needs (a privileged
// container, or a seccomp/AppArmor profile allowing unshare and mount, and a
// /proc that no mount covers). Probe tries a real sandbox once per process and
// says what failed.
package unshare
