package driver

import (
	"fmt"
	"math/bits"
	"strings"
)

// Capability is a set of things an OS provider can enforce. Providers declare the
// capabilities they enforce; policies need some of them (see Requirements).
type Capability uint32

const (
	// CapEnv: the program starts with exactly the policy's environment.
	CapEnv Capability = 1 << iota
	// CapFilesRead: the contents of nothing outside the exposed directories (and
	// what the program needs to run) can be read: no open, exec or mmap, no
	// directory listing.
	CapFilesRead
	// CapFilesWrite: nothing outside the expose-rw directories can be changed:
	// contents, entries (create, remove, rename, link), metadata (mode, owner,
	// times, extended attributes, file flags) and kernel settings (/proc/sys).
	CapFilesWrite
	// CapHide: ignore= paths in the exposed directories look absent, through
	// every door (contents, names in listings, metadata, link targets, extended
	// attributes), for the whole life of the sandbox: files the host creates
	// there later, or renames onto an ignored name, are hidden too.
	CapHide
	// CapUnixSockets: Unix sockets of the host (named sockets outside the exposed
	// directories, abstract sockets) cannot be reached.
	CapUnixSockets
	// CapTCPPorts: TCP connect and listen are filtered by port, and refused
	// without a rule.
	CapTCPPorts
	// CapNetHosts: traffic is filtered by host, address or network.
	CapNetHosts
	// CapUDP: UDP is filtered by port (and refused without a rule).
	CapUDP
	// CapUDPDeny: UDP can be refused entirely (what a policy without any UDP rule
	// needs).
	CapUDPDeny
	// CapRawSockets: raw and packet sockets are refused.
	CapRawSockets
	// CapSignals: signals and ptrace to processes outside the sandbox are refused.
	CapSignals
	// CapResourceLimits: the sandbox's resource limits are applied.
	CapResourceLimits
	// CapSeccomp: dangerous system calls (mount, bpf, keyctl, ...) are refused.
	CapSeccomp
	// CapProcessIsolation: processes outside the sandbox are invisible.
	CapProcessIsolation
	// CapUnprivileged: works without privilege, in an unprivileged container.
	CapUnprivileged
	// CapNoPrivileges: the program holds no capability and cannot gain one
	// (no_new_privs, empty bounding set): run as root, it still cannot change the
	// host's network, clock or hostname, and setuid programs give it nothing.
	CapNoPrivileges
	// CapFilesMeta: paths outside the exposed directories (and what the program
	// needs to run) look absent: no name, metadata (stat, access), link target,
	// extended attribute or watch (inotify, fanotify) of them is reachable.
	CapFilesMeta
	// CapIdentity: the program holds no identity of the host's: it is not the
	// host's root (whether the host runs as root or not), owns no host file
	// outside the exposed directories, and has no same-uid power over a host
	// process (signals, ptrace, prlimit, scheduling, /proc) or host IPC object.
	CapIdentity

	capEnd
)

var capNames = []string{"env", "files-read", "files-write", "hide", "unix-sockets", "tcp-ports", "net-hosts",
	"udp", "udp-deny", "raw-sockets", "signals", "rlimits", "seccomp", "process-isolation", "unprivileged", "no-privileges",
	"files-meta", "identity"}

var capGoNames = []string{"CapEnv", "CapFilesRead", "CapFilesWrite", "CapHide", "CapUnixSockets", "CapTCPPorts",
	"CapNetHosts", "CapUDP", "CapUDPDeny", "CapRawSockets", "CapSignals", "CapResourceLimits", "CapSeccomp",
	"CapProcessIsolation", "CapUnprivileged", "CapNoPrivileges", "CapFilesMeta", "CapIdentity"}

var capHelp = []string{
	"the program starts with exactly the policy's environment",
	"contents of nothing outside the exposed directories can be read",
	"nothing outside the expose-rw directories can be changed (contents, entries, metadata, sysctls)",
	"ignore= paths look absent (contents, names, metadata), also for files made or renamed there later",
	"host Unix sockets (named and abstract) cannot be reached",
	"TCP connect and listen filtered by port",
	"traffic filtered by host, address or network",
	"UDP filtered by port",
	"UDP refused entirely",
	"raw and packet sockets refused",
	"signals and ptrace to processes outside refused",
	"resource limits applied",
	"dangerous system calls refused by seccomp",
	"processes outside the sandbox invisible",
	"works without privilege (unprivileged containers)",
	"no capability held, none gained (no_new_privs, empty bounding set)",
	"paths outside the exposed directories look absent (no name, stat, link target, xattr or watch)",
	"the program holds no host identity (not host root, owns no host file, no power over host processes)",
}

// AllCapabilities is every capability.
const AllCapabilities = capEnd - 1

// Has reports whether c holds every capability of want.
func (c Capability) Has(want Capability) bool { return c&want == want }

// List returns the single capabilities of c, in declaration order.
func (c Capability) List() []Capability {
	var out []Capability
	for b := Capability(1); b < capEnd; b <<= 1 {
		if c&b != 0 {
			out = append(out, b)
		}
	}
	return out
}

// String renders c as a comma-separated list of names (as ParseCapabilities reads).
func (c Capability) String() string {
	if c == 0 {
		return "none"
	}
	var names []string
	for _, b := range c.List() {
		names = append(names, capNames[bits.TrailingZeros32(uint32(b))])
	}
	return strings.Join(names, ",")
}

// GoNames renders c as the Go expression of its constants ("CapEnv|CapHide"),
// for messages that tell a Go caller what to accept.
func (c Capability) GoNames() string {
	var names []string
	for _, b := range c.List() {
		names = append(names, capGoNames[bits.TrailingZeros32(uint32(b))])
	}
	return strings.Join(names, "|")
}

// Describe explains a single capability in a few words.
func (c Capability) Describe() string {
	if bits.OnesCount32(uint32(c)) != 1 || c >= capEnd {
		return c.String()
	}
	return capHelp[bits.TrailingZeros32(uint32(c))]
}

// ParseCapabilities reads a comma-separated list of capability names (as String
// writes them; "all" means every capability, "none" or "" none).
func ParseCapabilities(s string) (Capability, error) {
	var c Capability
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "", "none":
			continue
		case "all":
			c |= AllCapabilities
			continue
		}
		found := false
		for i, n := range capNames {
			if n == name {
				c |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown capability %q, expected one of %s", name, strings.Join(capNames, ", "))
		}
	}
	return c, nil
}
