package qemu

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// MemoryBound is what QEMU's cgroup lets a QEMU with a guest of memMiB hold.
func MemoryBound(memMiB int, tcg bool) int64 { return memoryBound(memMiB, tcg) }

// CgroupsOf returns the directories of the cgroups the provider made that
// hold the process pid, and, when there are none, why no cgroup can be made
// here.
func CgroupsOf(pid int) ([]string, string) {
	self, err1 := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	mi, err2 := os.ReadFile("/proc/self/mountinfo")
	if err1 != nil || err2 != nil {
		return nil, "no such process"
	}
	own := parseProcCgroup(string(self))
	var out []string
	add := func(m cgroupMount, p string) {
		if d := dirOf(m, p); d != "" && strings.HasPrefix(filepath.Base(p), cgroupPrefix) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, m := range parseCgroupMounts(string(mi)) {
		if m.v2 && own.hasV2 {
			add(m, own.v2)
		}
		for c, p := range own.v1 {
			if !m.v2 && slices.Contains(m.ctrls, c) {
				add(m, p)
			}
		}
	}
	if len(out) == 0 {
		return nil, probeCgroups().why
	}
	return out, ""
}

// Confinement says why QEMU runs without its seccomp filter, and without its
// jail, on this host (nil: it runs with it); p is the registered provider.
func Confinement(p any) (seccomp, jail error) {
	h := p.(*Provider).host()
	return h.seccomp, h.jail
}

// JailKeep are the capabilities QEMU keeps in its jail.
func JailKeep() []int { return slices.Clone(jailKeep) }

// WithoutJail makes the provider p confine the QEMU of the VMs it starts from
// now on as where the jail cannot be made (in a Landlock domain, where
// Landlock works), until restore is called; it returns why QEMU would not
// be in a Landlock domain either (nil when it would).
func WithoutJail(p any) (restore func(), landlock error) {
	h := p.(*Provider).host()
	saved := h.jail
	h.jail = errors.New("left out by the test")
	return func() { h.jail = saved }, h.landlock
}
