package qemu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kvmProbeTimeout bounds the probe guest's boot under KVM (a stock kernel
// boots in well under a second with working KVM).
const kvmProbeTimeout = 15 * time.Second

// probeAccel chooses the accelerator, and says why: KVM when a guest really
// boots with it, TCG otherwise. The verdict of a boot is kept in the cache,
// keyed on QEMU, the kernel and the initramfs, so that only the first probe
// of a host pays for it.
func probeAccel(ctx context.Context, h *hostState) (string, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg", fmt.Sprintf("TCG emulation: KVM is not usable (%v)", err)
	}
	f.Close()
	if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil {
		return "tcg", "TCG emulation: /dev/kvm is KVM-PVM (nested paravirtualisation), which a stock guest kernel cannot use"
	}
	m := &machine{QEMU: h.qemu, Kernel: h.vmlinux, Initrd: h.initrd, Memory: 256, CPUs: 1, Accel: "kvm", Cmdline: h.cmdline, cgroups: h.cgroups}
	h.confine(m)
	key, err := stateKey(m)
	if err != nil {
		return "tcg", fmt.Sprintf("TCG emulation: %v", err)
	}
	verdict := filepath.Join(h.cache, "accel-"+key)
	if b, err := os.ReadFile(verdict); err == nil && checkCacheFile(verdict) == nil {
		if acc, why, ok := strings.Cut(string(b), "\n"); ok && (acc == "kvm" || acc == "tcg") {
			return acc, why
		}
	}
	acc, why := bootProbe(ctx, m, h.empty)
	writeCacheFile(verdict, []byte(acc+"\n"+why))
	return acc, why
}

// bootProbe boots the guest under KVM and waits for its init's hello.
func bootProbe(ctx context.Context, m *machine, empty string) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, kvmProbeTimeout)
	defer cancel()
	start := time.Now()
	v, err := startVM(m, vmConfig{empty: empty}, nil, nil)
	if err != nil {
		return "tcg", fmt.Sprintf("TCG emulation: QEMU did not start with KVM: %v", err)
	}
	defer func() {
		v.kill()
		v.wait()
	}()
	if err := v.waitHello(ctx); err != nil {
		return "tcg", fmt.Sprintf("TCG emulation: a guest did not boot under KVM within %s", kvmProbeTimeout)
	}
	return "kvm", fmt.Sprintf("KVM: a probe guest booted in %s", time.Since(start).Round(time.Millisecond))
}
