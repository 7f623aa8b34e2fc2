// Package netfilter is the network filter of the namespace providers (unshare,
// bwrap, firejail): it turns a policy's net= rules into what the kernel enforces
// in the sandbox's own network namespace. The qemu provider sets it up in the
// network namespace of the QEMU process, whose user-mode network makes every
// connection of the guest a socket there (HostLoopback tells it which ports of
// 127.0.0.1 to relay in the guest).
//
// With no rule that lets traffic leave, the sandbox's namespace has its loopback
// interface only (lo, up): nothing can leave, and 127.0.0.1 is the sandbox's own.
// With such rules, the namespace gets a tap interface whose other end is
// slirp4netns (a user-mode TCP/IP stack that makes the sandbox's connections from
// the host as ordinary sockets), and an nftables table that lets out only what the
// rules allow:
//
//   - per protocol (TCP, UDP), destination address or network (the policy's
//     pinned addresses for host names), port ranges; DENY rules before ALLOW
//     rules whatever their order; everything else refused. A refused TCP
//     connection fails at once with ECONNREFUSED (the filter answers with a
//     reset), a refused UDP datagram fails its send(2) with EPERM; IPv6 has no
//     route out (ENETUNREACH);
//   - DNS only to the resolver the sandbox is given (10.0.2.3, which slirp4netns
//     forwards to the host's resolver), unless a DENY rule refuses it; the
//     sandbox's /etc/hosts (Hosts) lists the pinned names with exactly their
//     checked addresses, and its /etc/resolv.conf (ResolvConf) names 10.0.2.3;
//   - OUT rules to the host's loopback reach it: the sandbox's 127.0.0.1 on an
//     allowed port is redirected (DNAT) to the egress gateway, which slirp4netns
//     maps to the host's 127.0.0.1; without such a rule slirp4netns runs with
//     --disable-host-loopback, and the egress network itself (10.0.2.0/24) is
//     always refused, so the gateway cannot be reached directly;
//   - ALLOW IN rules on a loopback address (127.0.0.1, localhost, 127.0.0.0/8) or
//     on the wildcard 0.0.0.0 forward their ports from the host's 127.0.0.1 to the
//     sandbox's 127.0.0.1 (listeners on 127.0.0.1 or 0.0.0.0 receive them); other
//     IN rules only let the program listen, which nothing outside can reach.
//
// A rule the filter cannot serve at all is refused by Compile with a *RuleError
// naming its file(line): an ALLOW rule whose addresses are all IPv6 (the egress
// network is IPv4 only), a loopback address other than 127.0.0.1 (slirp4netns
// maps only that one), an address of the egress network, or an IN rule that would
// forward more than MaxForwards ports. A rule only part of whose addresses can be
// reached (localhost is 127.0.0.1 and ::1) is enforced for the others and
// reported by Warnings. docs/network.md describes the ruleset.
//
// # How a provider uses it
//
//	f, err := netfilter.Compile(pol.Network()) // when the sandbox is prepared: refuse the policy on error
//	// start the sandbox's namespaces with the program held (not yet executed)
//	sess, err := f.Setup(ctx, netfilter.Namespace{Net: "/proc/PID/ns/net", User: "/proc/PID/ns/user", PID: pid})
//	// on error: kill the sandbox, the program never runs
//	// bind f.Hosts() on /etc/hosts and f.ResolvConf() (when not nil) on /etc/resolv.conf of the sandbox
//	// release the program; after it ended (Wait): sess.Close()
//
// As root (CAP_SYS_ADMIN and CAP_NET_ADMIN), Setup joins the sandbox's network
// namespace from a locked thread of the host process. Without privileges it
// re-executes the host binary as a helper whose cgo constructor joins the
// sandbox's user namespace (which the host's user owns) and network namespace
// before the Go runtime starts, and installs the same table from there; slirp4netns
// joins the user namespace itself (--userns-path). That needs Namespace.User and a
// cgo build; otherwise Setup fails with ErrUnprivileged, and the provider must
// refuse the policy's net= rules (Available says so beforehand). The program in
// the sandbox must not hold CAP_NET_ADMIN in its namespace (the providers drop
// every capability): it could remove the table.
//
// Set-up is fail-closed: any failure (table, sysctl, slirp4netns, a forward whose
// host port is taken) is an error, and Setup leaves nothing behind.
package netfilter
