// Package qemu is the qemu provider (os-sandbox=qemu): each sandbox runs its
// programs in a QEMU virtual machine, the strongest isolation of the
// providers (the guest has its own kernel; root in the guest is not root on
// the host). Importing the package registers the provider.
//
// The guest boots the distribution's kernel (the newest /boot/vmlinuz-* with
// its /lib/modules, Debian's linux-image-amd64) as an uncompressed ELF vmlinux
// with the PVH entry, extracted once from the packaged bzImage and cached per
// user under its hash (decompressing a bzImage under TCG costs seconds). The
// initramfs, built at run time and cached under its hash, holds the guest's
// init (qemu/internal/guestinit, a static CGO_ENABLED=0 build embedded in the
// package: `go generate ./qemu` rebuilds it and a test checks it is up to
// date) and the kernel modules it loads with finit_module (virtio, 9p, the
// virtio-serial console, virtio-net).
//
// Files: every expose-ro= and expose-rw= directory is its own virtio-9p share,
// read-only in QEMU (readonly=on) unless it is expose-rw=, so that even root
// in the guest cannot write to a read-only share. What the program needs to
// run (its interpreter, libraries) comes read-only the same way: directories
// as shares, single files through a read-only mirror in the cache. Nothing
// else of the host is shared: never the host's /proc or /dev (the guest's own
// stand for them), and a rule for a directory that is or holds another of the
// kernel's pseudo file systems (sysfs, cgroup, debugfs...) is refused. ignore=: as root (with /dev/fuse), QEMU reads
// every exposed directory an ignore= rule reaches through the filter of
// package hidefs, mounted in a mount namespace of QEMU's own: the ignored
// names are absent for the VM's life, whatever the host does meanwhile (hide
// is claimed). Elsewhere, what the exposed directories hold under an ignored
// name when the VM starts is masked in the guest (the program, with no
// capability, cannot unmount a mask), and hide is not claimed.
//
// Programs: the host talks to the init over a virtio-serial port. Each program
// starts in new pid, mount, IPC and UTS namespaces of the guest with exactly
// the policy's environment, no capability (empty bounding set, SECBIT_NOROOT
// locked, no_new_privs), no access to the kernel's keyrings (a seccomp filter
// refuses add_key, request_key and keyctl) and the resource limits; its
// descriptors are relayed
// to the host's. A placeholder process on the host stands for it (what the
// Sandbox waits for and kills): its end, a signal or a timeout reaches the
// program in the guest, and a guest that does not answer is killed with its
// VM. A sandbox keeps one VM while programs run in it (the workers of Call and
// the eval zygote included); the VM stops with its last program.
//
// Network: none (no network device) without a net= rule that lets traffic
// leave. With such rules, QEMU runs in a network namespace of its own (and,
// without root, a user namespace of its own that owns it) behind the network
// filter of the namespace providers (internal/netfilter: an nftables table
// built from the rules, slirp4netns as the only way out), set up before the
// guest's network is configured. The guest's network is QEMU's user-mode
// network (libslirp in QEMU, 10.0.3.0/24, IPv6 off): every connection and
// datagram of the guest is a socket of the QEMU process, which the filter
// judges by its real destination, outside the guest, so that nothing done in
// the guest (as root or not) can widen it. The guest's /etc/hosts and
// /etc/resolv.conf are the filter's (DNS goes to the filter's resolver,
// 10.0.2.3, through QEMU); the ports of 127.0.0.1 that OUT rules allow are
// relayed by the guest's init from the guest's 127.0.0.1 to QEMU's gateway,
// which QEMU maps to its namespace's 127.0.0.1 and the filter to the host's.
// IN rules that forward the host's ports do so in three steps: the filter
// from the host's 127.0.0.1 to QEMU's namespace, QEMU's host forwards (added
// over QMP) to the guest, the init's relays to the program's 127.0.0.1. A rule
// the VM cannot enforce exactly is refused, naming it: what the filter
// refuses, an address of the guest's own network, more than 256 ports of the
// host's loopback. A refused UDP datagram is dropped outside the guest (the
// guest's send succeeds); listening in the guest is not refused (nothing
// outside reaches it but the forwarded ports).
//
// Accelerator: KVM only when a guest really boots with it; TCG otherwise
// (`pysandboxes probe` says which and why). Fast start: the VM state saved
// after boot and before any share is mounted (QEMU refuses to save a VM with
// 9p mounted) is restored instead of booting; it is keyed on the QEMU binary,
// the kernel, the initramfs and the command line, and made again when any of
// them changes.
//
// On the host, each QEMU process runs in a cgroup of its own that bounds its
// memory (the guest's RAM, TCG's translation cache and a measured overhead),
// swap and tasks, where the host lets the caller make one (cgroup.go);
// elsewhere the sandbox's log warns once and qemu.cgroup=on refuses to start.
// QEMU, the boundary, holds as little as the VM needs (jail.go): its own
// seccomp filter (-sandbox) where it has one, and as root a jail made before
// QEMU is executed: a mount namespace whose read-only root shows only QEMU's
// files, the guest's kernel and the shares (read-only ones as read-only
// mounts), a /proc of its own pid namespace alone, IPC and network
// namespaces of its own, and the capabilities of a file server over the
// shares (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER,
// CAP_NET_BIND_SERVICE) under no_new_privs; without root, a Landlock domain
// granting the same files and nothing else.
//
// Parameters (qemu.KEY=VALUE lines), checked against a table; any other is
// refused, naming the rule: memory, cpus, kvm, kernel, binary, start-timeout,
// snapshot, cgroup.
package qemu
