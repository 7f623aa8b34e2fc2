// Package landlock is the landlock OS provider: the kernel's Landlock LSM confines
// the program's file system and TCP accesses, and a seccomp filter refuses what
// Landlock cannot see. It needs no privilege and works in unprivileged containers.
//
// Package pysandboxes links it (importing this package registers it), and
// os-sandbox=landlock (or auto, which prefers
// it to every other confining provider) selects it.
//
// # How it confines
//
// The program starts under the supervisor (package internal/supervise: the host
// binary re-executed). On one dedicated thread, the supervisor sets no_new_privs,
// empties every capability set (the bounding set too: a program run as root keeps
// uid 0 but no privilege, and exec gives none back), builds the Landlock ruleset with raw system calls and restricts that thread
// only, installs the seccomp filter, and forks the program from it: the program
// and everything it starts inherit the restrictions, while the supervisor keeps
// its freedom to wait for and kill the process tree. Any failure ends the launch
// with an error, and the program never runs.
//
// The ruleset handles every file right, every network right and every scope the
// kernel's Landlock ABI knows (go-landlock's description of each ABI), so a newer
// kernel is used at its strictest.
//
// # Translation of the policy
//
// Compile translates the policy once per sandbox; Prepare adds what each program
// needs to run.
//
//   - expose-ro= grants execute, read file and read directory beneath the
//     directory; expose-rw= grants every file right of the ABI (write, truncate,
//     remove, every make_*, refer, ioctl_dev...). There is no implicit write
//     anywhere: neither the working directory nor /tmp.
//   - Implicit read-only grants, computed for the program actually started
//     (internal/needs, cached per program version): the program; for an ELF
//     binary its loader, its shared libraries (resolved like ld.so, recursively)
//     and /etc/ld.so.cache; for a "#!" script its interpreter (and the command of
//     "#!/usr/bin/env NAME"); for a Python interpreter its standard library and
//     site directories, the libraries of their extension modules and the targets
//     of the links they hold. Landlock checks the file a path resolves to and never
//     the symbolic links on the way, so the canonical files are granted. Also
//     /dev/null, /dev/zero, /dev/full, /dev/random and /dev/urandom, read and write
//     (nothing can be created beside them); and, when a net= rule allows some
//     traffic, /etc/hosts, /etc/resolv.conf, /etc/nsswitch.conf, /etc/gai.conf,
//     /etc/host.conf and the CA certificate stores (/etc/ssl/certs and
//     openssl.cnf, /etc/ca-certificates, /usr/share/ca-certificates, /etc/pki's
//     CA directories; never /etc/ssl/private). The debug log lists them; so does
//     `pysandboxes probe` (Provider.Details). Nothing else is implicit: /proc,
//     /sys, /dev/shm (Python's multiprocessing locks), /dev/tty, /etc/localtime,
//     the locale files and the commands a script runs must be exposed by the
//     policy; name the real interpreter (/usr/bin/python3), not a version
//     manager's shim, which would need its own tree.
//   - ignore= makes the ignored paths unreachable: an exposed directory that holds
//     one is not granted as a whole, but entry by entry down to the ignored path.
//     The directories on that way keep only the listing of their entries (names of
//     ignored entries stay visible in listings, their content does not), every
//     other entry keeps the exposed rights, and other hard links to an ignored file
//     found in the exposed directories are hidden too. Consequences: an entry
//     created later directly in such a directory (by anyone) is not accessible,
//     and the program can neither create nor remove entries directly there. The
//     walk is bounded (10,000 entries per exposed directory); when the split cannot
//     be made exact (too many entries, an unreadable directory, an ignore= pattern
//     hiding the exposed directory itself, an implicit grant holding an ignored
//     path), the rule is refused, or, when the caller accepted CapHide, not
//     enforced there, with a warning. A read-only directory exposed inside a
//     read-write one is split out the same way (Landlock adds the rights of nested
//     rules up).
//   - TCP is always handled (ABI 4 and later), even without a net= rule, which then
//     means no TCP at all. ALLOW rules open CONNECT_TCP (OUT) and BIND_TCP (IN) on
//     their ports; DENY rules for every host (*) take their ports away again; a
//     right open on every port is left unhandled. Landlock cannot tell hosts
//     apart: a rule naming a host, an address or a network is refused unless the
//     caller accepted CapNetHosts, and then its ports are open for every host
//     (hosts are checked by the Python layer only; a warning says so).
//   - MPTCP sockets are not subject to Landlock's TCP rules (measured): seccomp
//     refuses them whenever TCP is handled. UDP cannot be filtered by port before
//     ABI 10: seccomp refuses UDP sockets unless a UDP ALLOW rule exists, which
//     needs CapUDP accepted (UDP is then allowed to every port; from ABI 10 Landlock
//     still filters its ports). Raw and packet sockets are always refused.
//   - Unix sockets: before ABI 9 Landlock cannot stop a connect() to a named socket
//     of the host (/run/docker.sock...), so seccomp refuses socket(AF_UNIX), which
//     closes named and abstract host sockets alike (socketpair stays allowed). ABI 6
//     also scopes abstract sockets and signals to the sandbox. The parameter
//     landlock.unix-sockets=allow lets programs create Unix sockets; before ABI 9
//     it then needs CapUnixSockets accepted. Any other landlock.* key is an error.
//   - Every path is opened by the supervisor without following symbolic links: an
//     exposed directory or a path the program needs that vanished (or became a
//     link) between Compile and the start fails the start; an entry of a split
//     directory that vanished is skipped (that only grants less).
//
// # What it enforces
//
//	capability         ABI >= 6 + seccomp   no seccomp (CGO_ENABLED=0)   ABI < 6
//	env                yes                  yes                          yes
//	files-read         yes                  yes                          yes
//	files-write        yes                  yes                          yes
//	hide (ignore=)     yes (see above)      yes                          yes
//	unix-sockets       yes (seccomp)        no (yes from ABI 9)          with seccomp
//	tcp-ports          yes (ABI >= 4)       no: MPTCP bypasses Landlock  with seccomp, ABI >= 4
//	net-hosts          no                   no                           no
//	udp (by port)      no                   no                           no
//	udp-deny           yes (seccomp)        no                           with seccomp
//	raw-sockets        yes (seccomp)        no                           with seccomp
//	signals, ptrace    yes                  yes                          no (ptrace only)
//	rlimits            yes                  yes                          yes
//	seccomp            yes                  no                           with seccomp
//	process-isolation  no                   no                           no
//	unprivileged       yes                  yes                          yes
//	no-privileges      yes                  yes                          yes
//
// Without seccomp the provider drops what it would need the filter for: nothing
// is weakened silently, a policy that needs it is refused unless the caller
// accepts it unenforced.
//
// What Landlock does not hide: the metadata of files (stat works on any path), the
// names in a listed directory, processes (no pid namespace: /proc of other
// processes is unreadable unless exposed, but they exist), and the network
// addresses of the host. Files opened before the restriction (the standard
// streams, ExtraFiles) stay usable.
package landlock
