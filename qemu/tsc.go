package qemu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// hostTSC returns the host's TSC frequency in kHz (0 when unknown), measured
// once per host boot and kept in the cache. Under TCG the guest's TSC is the
// host's (QEMU's rdtsc reads the host counter), and so it is under KVM by
// default: the guest kernel is told the frequency (tsc_early_khz=) instead of
// calibrating it, which under emulation is slow and, on a microvm, hangs
// about one boot in three. The value is part of the kernel's command line,
// hence of the saved state's key: it is rounded to the MHz and measured only
// once per boot of the host, so that the key does not change from one run to
// the next.
func hostTSC(cache string) uint64 {
	if !haveTSC || !constantTSC() {
		return 0
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0
	}
	id := strings.TrimSpace(string(boot))
	path := filepath.Join(cache, "tsc-khz")
	if b, err := os.ReadFile(path); err == nil && checkCacheFile(path) == nil {
		if bid, v, ok := strings.Cut(strings.TrimSpace(string(b)), " "); ok && bid == id {
			if khz, err := strconv.ParseUint(v, 10, 64); err == nil {
				return khz
			}
		}
	}
	khz := measureTSC()
	if khz != 0 {
		writeCacheFile(path, fmt.Appendf(nil, "%s %d\n", id, khz))
	}
	return khz
}

// measureTSC times the TSC against the monotonic clock over a few short
// intervals and keeps the tightest one (a preemption between the two reads
// widens an interval, never narrows it), rounded to the MHz.
func measureTSC() uint64 {
	var best float64
	bestSpan := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		c0 := rdtsc()
		t0b := time.Now()
		time.Sleep(10 * time.Millisecond)
		t1 := time.Now()
		c1 := rdtsc()
		t1b := time.Now()
		span := t0b.Sub(t0) + t1b.Sub(t1)
		d := t1.Sub(t0b) + span/2
		if d <= 0 || c1 <= c0 {
			continue
		}
		if span < bestSpan {
			bestSpan = span
			best = float64(c1-c0) / (float64(d) / 1e6)
		}
	}
	khz := uint64(best/1000+0.5) * 1000
	if khz < 100_000 || khz > 20_000_000 {
		return 0
	}
	return khz
}

// constantTSC reports whether the CPU says its TSC runs at a constant rate
// (constant_tsc and nonstop_tsc in /proc/cpuinfo).
func constantTSC() bool {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "flags" {
			fl := " " + v + " "
			return strings.Contains(fl, " constant_tsc ") && strings.Contains(fl, " nonstop_tsc ")
		}
	}
	return false
}
