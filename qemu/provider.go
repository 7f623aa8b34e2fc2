package qemu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/pysandboxes/pysandboxes/driver"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/internal/netfilter"
	"github.com/pysandboxes/pysandboxes/internal/prepare"
	"github.com/pysandboxes/pysandboxes/internal/systool"
)

func init() {
	placeholderMain()
	viewMain()
	driver.Register(&Provider{})
}

// Name is the os-sandbox= value of the provider.
const Name = "qemu"

// Provider is the qemu provider. Importing the package registers one; its zero
// value is ready to use.
type Provider struct {
	core   prepare.Core[*hostState]
	states sync.Mutex // serializes the making of saved states
	// netOnce and netErr: whether the network filter works here.
	netOnce sync.Once
	netErr  error
}

// netAvailable says whether the network filter around QEMU works here (nil
// when it does), checked once.
func (p *Provider) netAvailable(ctx context.Context) error {
	p.netOnce.Do(func() { p.netErr = netfilter.Available(ctx) })
	return p.netErr
}

// hostState is what the probe found.
type hostState struct {
	err    error
	qemu   string
	kernel *kernel
	cache  string
	// vmlinux and initrd are the guest's kernel and initramfs (in the cache).
	vmlinux, initrd string
	// accel is "kvm" or "tcg", and why.
	accel, accelWhy string
	// empty is an empty directory (the unused 9p slots).
	empty string
	// cmdline is the guest kernel's command line.
	cmdline string
	// cgroups is where QEMU's cgroups are made (cgroup.go).
	cgroups *cgroupHost
	// seccomp, jail and landlock: why QEMU cannot run under its seccomp
	// filter, in its jail, in a Landlock domain (jail.go); nil when it can.
	seccomp, jail, landlock error
}

// confine makes m's QEMU run under its seccomp filter where QEMU has one, and
// in its jail as root, else in a Landlock domain, where they work here.
func (h *hostState) confine(m *machine) *machine {
	m.Seccomp = h.seccomp == nil
	switch {
	case h.jail == nil:
		m.jail = jailMount
	case h.landlock == nil:
		m.jail = jailLandlock
	default:
		m.jail = jailNone
	}
	return m
}

func (p *Provider) host() *hostState {
	return p.core.Host(func() *hostState { return probeHost(context.Background(), "", "", probeCgroups()) })
}

// probeHost finds QEMU and the kernel, and prepares the kernel and the
// initramfs. cg is where QEMU's cgroups are made.
func probeHost(ctx context.Context, binary, kernelImage string, cg *cgroupHost) *hostState {
	h := &hostState{cgroups: cg}
	if binary == "" {
		// The system's directories before PATH, never a QEMU another user
		// could replace (package systool): the host runs it.
		b, err := systool.Find("qemu-system-x86_64", "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
		if err != nil {
			h.err = err
			return h
		}
		binary = b
	}
	if real, err := filepath.EvalSymlinks(binary); err == nil {
		binary = real
	}
	h.qemu = binary
	k, err := findKernel(kernelImage)
	if err != nil {
		h.err = err
		return h
	}
	h.kernel = k
	if h.cache, err = cacheDir(); err != nil {
		h.err = fmt.Errorf("qemu: the cache: %w", err)
		return h
	}
	// One process at a time prepares the guest's files and measures the
	// TSC; the others then find them (and the same saved state's key).
	unlock, err := lockCache(ctx, h.cache, prepLock)
	if err != nil {
		h.err = err
		return h
	}
	h.vmlinux, h.initrd, err = guestFiles(h.cache, k, guestInit)
	if err == nil {
		h.cmdline = bootArgs(hostTSC(h.cache))
	}
	unlock()
	if err != nil {
		h.err = err
		return h
	}
	h.empty = filepath.Join(h.cache, "empty")
	if err := os.MkdirAll(h.empty, 0o755); err != nil {
		h.err = err
		return h
	}
	h.seccomp = cachedSeccomp(ctx, h.cache, h.qemu)
	h.jail = jailAvailable()
	h.landlock = landlockAvailable()
	h.accel, h.accelWhy = probeAccel(ctx, h)
	return h
}

// Name returns "qemu".
func (p *Provider) Name() string { return Name }

// Probe reports whether the provider works here: QEMU, a kernel with its
// modules, and the accelerator (KVM when a guest boots with it, TCG
// otherwise).
func (p *Provider) Probe(context.Context) error { return p.host().err }

// Capabilities is what the VM enforces (see the package documentation).
// Without net= rules the VM has no network device: no traffic at all, which
// is what a policy without rules needs (tcp-ports, udp-deny, raw-sockets).
// With them, QEMU's user-mode network runs in a network namespace of its own
// behind the network filter (internal/netfilter), which judges every
// connection and datagram of the guest by host, network, port and protocol
// outside the guest: net-hosts and udp are claimed when the filter works here.
// ignore= is claimed (hide) where the host can serve the exposed directories
// through the filter (hideview.Available: as root, with /dev/fuse): QEMU reads
// them through it (view.go). Elsewhere the guest's init masks what is there
// when the VM starts, not what the host adds later: hide is not claimed.
func (p *Provider) Capabilities() driver.Capability {
	if p.host().err != nil {
		return 0
	}
	c := driver.CapEnv | driver.CapFilesRead | driver.CapFilesWrite | driver.CapFilesMeta |
		driver.CapUnixSockets | driver.CapTCPPorts | driver.CapUDPDeny |
		driver.CapRawSockets | driver.CapSignals | driver.CapResourceLimits |
		driver.CapProcessIsolation | driver.CapUnprivileged | driver.CapNoPrivileges |
		driver.CapIdentity
	if p.netAvailable(context.Background()) == nil {
		c |= driver.CapNetHosts | driver.CapUDP
	}
	if hideview.Available() == nil {
		c |= driver.CapHide
	}
	return c
}

// Details describes the provider on this host, for `pysandboxes probe`.
func (p *Provider) Details() []string {
	h := p.host()
	if h.err != nil {
		return []string{h.err.Error()}
	}
	return []string{
		"QEMU: " + h.qemu,
		fmt.Sprintf("guest kernel: %s (%s)", h.kernel.Image, h.kernel.Version),
		fmt.Sprintf("cache: %s (the kernel uncompressed: %s; initramfs: %s)", filepath.Dir(h.vmlinux), filepath.Base(h.vmlinux), filepath.Base(h.initrd)),
		"accelerator: " + h.accel + " (" + h.accelWhy + ")",
		h.cgroups.String(),
		confineDetail(h),
		"files: each exposed directory is a 9p share (read-only for expose-ro); what the program needs to run comes read-only " +
			"(its directories as shares, its files through a mirror in the cache); nothing else of the host is shared",
		hideDetail(),
		"the program: in a pid, mount, IPC and UTS namespace of the guest, as the shares' owner with no capability " +
			"(empty bounding set, SECBIT_NOROOT locked, no_new_privs), resource limits applied in the guest",
		p.netDetail(),
	}
}

// hideDetail describes how ignore= is enforced here, for Details.
func hideDetail() string {
	if err := hideview.Available(); err != nil {
		return "ignore=: what the exposed directories hold under an ignored name when the VM starts is masked in the guest " +
			"(hide is not claimed: " + err.Error() + ")"
	}
	return "ignore=: QEMU reads the exposed directories an ignore= rule reaches through the filter of ignore= paths, " +
		"in a mount namespace of its own (hide)"
}

// netDetail describes the network, for Details.
func (p *Provider) netDetail() string {
	if err := p.netAvailable(context.Background()); err != nil {
		return "network: none without net= rules (no network device); net= rules are refused: the network filter cannot work here: " + err.Error()
	}
	return "network: none without net= rules (no network device); with them, QEMU's user-mode network in a network namespace " +
		"of its own behind the network filter (hosts, networks, ports, UDP, DNS only to the filter's resolver), the host's " +
		"127.0.0.1 reached under the guest's 127.0.0.1 through relays of the guest's init; IN forwards through QEMU's host forwards"
}
