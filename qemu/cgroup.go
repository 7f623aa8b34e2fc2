package qemu

// QEMU's own memory on the host. qemu.memory= bounds the guest's RAM, not
// what QEMU holds beside it: TCG's translation cache, the 9p server's buffers
// and file identifiers, user-mode network sockets, device state. A guest
// kernel (root in the guest) could grow those. Each QEMU process therefore
// starts in a cgroup of its own that bounds its memory (the guest's RAM plus
// a measured overhead, no swap) and its number of threads, when the host lets
// the caller make one: the probe finds where, once per process, and never
// assumes.
//
// Where: under the caller's own cgroup, so that QEMU stays inside every bound
// the host put on the caller. On a cgroup v2 host, a child of the caller's
// cgroup when that cgroup's children may have the memory and pids
// controllers (they are enabled there, or can be: the root cgroup, or a
// delegated cgroup holding no process), otherwise a sibling of it under a
// parent that already gives its children both controllers and lets the
// caller make directories (systemd's Delegate=: the service's processes in a
// leaf of their own). QEMU is started in it directly (clone3's
// CLONE_INTO_CGROUP). On a host whose memory and pids controllers are still
// on cgroup v1 hierarchies (hybrid hosts, some containers), a child of the
// caller's cgroup in each, which QEMU joins right after its start (its first
// milliseconds, QEMU's own start-up, are counted to the caller's cgroup).
//
// When no cgroup can be made (an unprivileged caller without a delegated
// cgroup, a read-only /sys/fs/cgroup in a container), this is a host-side
// resource bound, not a policy rule: the VM runs unbounded, the sandbox's
// log says so once (a warning), and `pysandboxes probe` says why.
// qemu.cgroup=on makes it a requirement: the sandbox then refuses to start.
//
// Clean-up: the cgroup is removed when QEMU has exited, whatever ended it
// (its normal end, a kill, a crash), and at once when QEMU could not start.
// A host process that died leaves its cgroups behind: they are named by the
// process's pid and start time, and the next probe (of any host process)
// removes those whose process is gone and that no process is in.

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/qemu/internal/mountinfo"
	"golang.org/x/sys/unix"
)

const (
	// cgroupPrefix starts the name of every cgroup the provider makes:
	// pysandboxes-qemu-<pid>-<start time>-<n> (the host process's pid and
	// start time in clock ticks, as /proc/<pid>/stat says).
	cgroupPrefix = "pysandboxes-qemu-"
	// tcgCacheMiB is the size of TCG's translation cache, given to QEMU
	// (-accel tcg,tb-size=): by default QEMU takes up to 1 GiB (an eighth of
	// the host's memory), which it fills before it starts again, and which
	// the cgroup's bound would have to leave room for. The busy program
	// below filled 66 MiB of it: a VM translates 256 MiB of code before its
	// first flush (which costs translating again what runs next).
	tcgCacheMiB = 256
	// qemuOverheadMiB is what QEMU holds beside the guest's RAM and the
	// translation cache. Measured under TCG (QEMU 7.2, a 512 MiB guest
	// restored from a saved state, a Python program importing the 288
	// modules of the standard library and computing: JSON, sqlite, regular
	// expressions, 300 MiB of its own memory touched): a peak resident size
	// of 650 MB, 537 MB of it the guest's RAM, 23 MB QEMU's own files, the
	// rest (about 90 MB) anonymous memory, the translation cache's 66 MiB
	// (of its 256) included;
	// its cgroup's peak charge was 649 MB (619 MiB: the guest's RAM + 107
	// MiB). Over twice that, for 9p's buffers under heavier file traffic and
	// the network.
	qemuOverheadMiB = 256
	// qemuPidsMax bounds QEMU's tasks: its threads (one per vCPU, the main
	// loop, RCU, and a pool of up to 64 I/O workers for 9p); QEMU starts no
	// process. Measured: 7 in the run above.
	qemuPidsMax = 128
	// staleAge is how old a cgroup of a dead host process must be to be
	// removed: a cgroup is made empty, QEMU joins it within milliseconds.
	staleAge = 10 * time.Second
)

// errNoCgroup is wrapped by the error of a cgroup that cannot be made here.
var errNoCgroup = errors.New("no cgroup can bound QEMU here")

// cgroupHost is where this host process makes QEMU's cgroups: what the probe
// found, kept with the provider's host state.
type cgroupHost struct {
	// v1 says the controllers are on cgroup v1 hierarchies: dirs are then
	// the memory and the pids parents.
	v1      bool
	parents []string
	// memsw: v1's memory controller bounds swap too.
	memsw bool
	// why says why no cgroup can be made (parents is empty).
	why string
	// self names this process's cgroups.
	self string
	seq  atomic.Uint64
	warn sync.Once
}

// available reports whether cgroups can be made.
func (h *cgroupHost) available() bool { return h != nil && len(h.parents) > 0 }

// String describes the cgroups, for Details.
func (h *cgroupHost) String() string {
	if h == nil {
		return "QEMU's own memory: not bounded (not probed)"
	}
	if !h.available() {
		return "QEMU's own memory: not bounded (" + h.why + "); qemu.cgroup=on refuses to start without the bound"
	}
	kind, swap := "cgroup v2", "no swap (where the kernel accounts it)"
	if h.v1 {
		kind = "cgroup v1 (memory, pids)"
		if !h.memsw {
			swap = "swap not bounded (the kernel does not account it: swapaccount=1)"
		}
	}
	return fmt.Sprintf("QEMU's own memory: each QEMU in a %s of its own under %s: memory bounded to the guest's RAM + %d MiB "+
		"(+ %d MiB of TCG translation cache under TCG), %s, %d tasks", kind, strings.Join(h.parents, " and "),
		qemuOverheadMiB, tcgCacheMiB, swap, qemuPidsMax)
}

// checkCgroupParam refuses qemu.cgroup=on where no cgroup can be made.
func checkCgroupParam(p params, h *cgroupHost) error {
	if p.cgroup != "on" || h.available() {
		return nil
	}
	why := "not probed"
	if h != nil {
		why = h.why
	}
	return fmt.Errorf("%s: QEMU's own memory cannot be bounded here: %w: %s", p.cgroupRule, errNoCgroup, why)
}

// warnUnbounded says once, in the log, that QEMU runs without a cgroup.
func (h *cgroupHost) warnUnbounded(logger *slog.Logger) {
	if h == nil || h.available() || logger == nil {
		return
	}
	h.warn.Do(func() {
		logger.Warn("os-sandbox qemu: QEMU's own memory beyond the guest's RAM is not bounded: no cgroup can be made here "+
			"(qemu.cgroup=on refuses to start without it)", "why", h.why)
	})
}

// probeCgroups finds where this process can make QEMU's cgroups, and
// removes what dead host processes left there.
func probeCgroups() *cgroupHost {
	h := &cgroupHost{self: selfName()}
	self, err1 := os.ReadFile("/proc/self/cgroup")
	mi, err2 := os.ReadFile("/proc/self/mountinfo")
	if err := errors.Join(err1, err2); err != nil {
		h.why = err.Error()
		return h
	}
	own := parseProcCgroup(string(self))
	mounts := parseCgroupMounts(string(mi))
	var whys []string
	p, err := v2Parent(own, mounts)
	if err == nil {
		err = cloneInto(p)
	}
	if err == nil {
		h.parents = []string{p}
	} else {
		whys = append(whys, err.Error())
		if ps, err := v1Parents(own, mounts); err == nil {
			h.v1, h.parents = true, ps
			_, err := os.Stat(filepath.Join(ps[0], "memory.memsw.limit_in_bytes"))
			h.memsw = err == nil
		} else {
			whys = append(whys, err.Error())
		}
	}
	if !h.available() {
		h.why = strings.Join(whys, "; ")
		return h
	}
	for _, p := range h.parents {
		sweepCgroups(p, staleAge)
	}
	return h
}

// selfName is the part of a cgroup's name that says which host process made
// it: its pid and its start time.
func selfName() string {
	return fmt.Sprintf("%d-%d", os.Getpid(), startTime(os.Getpid()))
}

// startTime is a process's start time in clock ticks since the boot (0 when
// there is no such process).
func startTime(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	t, _ := strconv.ParseUint(f[19], 10, 64)
	return t
}

// ownCgroups is /proc/self/cgroup: the v2 path, and the v1 path of each
// controller.
type ownCgroups struct {
	v2    string
	hasV2 bool
	v1    map[string]string
}

func parseProcCgroup(s string) ownCgroups {
	o := ownCgroups{v1: map[string]string{}}
	for _, l := range strings.Split(s, "\n") {
		id, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			o.v2, o.hasV2 = path, true
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			o.v1[c] = path
		}
	}
	return o
}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct {
	point, root string
	v2          bool
	ctrls       []string // v1: its controllers
}

// parseCgroupMounts reads the cgroup mounts of a mountinfo.
func parseCgroupMounts(text string) []cgroupMount {
	var out []cgroupMount
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{point: mountinfo.Unescape(f[4]), root: mountinfo.Unescape(f[3])}
		switch g[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			m.ctrls = strings.Split(g[2], ",")
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// dirOf is the directory of the cgroup path p in the mount m ("" when the
// mount does not show it).
func dirOf(m cgroupMount, p string) string {
	rel, ok := strings.CutPrefix(p, m.root)
	if !ok || (m.root != "/" && rel != "" && !strings.HasPrefix(rel, "/")) {
		return ""
	}
	d := filepath.Join(m.point, rel)
	if _, err := os.Stat(d); err != nil {
		return ""
	}
	return d
}

// needed are the controllers QEMU's cgroup needs.
var needed = []string{"memory", "pids"}

// v2Parent finds the cgroup v2 directory under which this process can make
// QEMU's cgroups.
func v2Parent(own ownCgroups, mounts []cgroupMount) (string, error) {
	if !own.hasV2 {
		return "", errors.New("cgroup v2: this process is in no cgroup v2")
	}
	var d, top string
	for _, m := range mounts {
		if m.v2 {
			if d = dirOf(m, own.v2); d != "" {
				top = filepath.Clean(m.point)
				break
			}
		}
	}
	if d == "" {
		return "", fmt.Errorf("cgroup v2: this process's cgroup %s is not mounted here", own.v2)
	}
	ctrls := fields(filepath.Join(d, "cgroup.controllers"))
	if !hasAll(ctrls) {
		return "", fmt.Errorf("cgroup v2: the memory and pids controllers are not available in %s (it has: %s)", d, orNone(ctrls))
	}
	// The caller's own cgroup, when its children have (or may be given) both
	// controllers.
	sub := fields(filepath.Join(d, "cgroup.subtree_control"))
	errOwn := canMake(d)
	if errOwn == nil && !hasAll(sub) {
		errOwn = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +pids"), 0)
		if errOwn != nil {
			errOwn = fmt.Errorf("enabling memory and pids for its children: %w", errOwn)
		}
	}
	if errOwn == nil {
		return d, nil
	}
	// A sibling, under a parent that gives its children both controllers.
	parent := filepath.Dir(d)
	if d == top || !hasAll(fields(filepath.Join(parent, "cgroup.subtree_control"))) {
		return "", fmt.Errorf("cgroup v2: not in this process's cgroup %s: %v", d, errOwn)
	}
	if err := canMake(parent); err != nil {
		return "", fmt.Errorf("cgroup v2: neither in this process's cgroup %s (%v) nor beside it (%v)", d, errOwn, err)
	}
	return parent, nil
}

// cloneInto checks that a process can be started in a new cgroup under
// parent with clone3's CLONE_INTO_CGROUP (Linux 5.7): the host binary started
// again as a placeholder without its lifeline, which exits at once.
func cloneInto(parent string) error {
	d := filepath.Join(parent, cgroupPrefix+"probe-"+selfName())
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	defer removeCgroup(d)
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{placeholderMarker}
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cgroup v2: starting a process in a cgroup (clone3 with CLONE_INTO_CGROUP, Linux 5.7): %w", err)
	}
	return nil
}

// v1Parents finds the cgroup v1 directories (memory, pids) under which this
// process can make QEMU's cgroups.
func v1Parents(own ownCgroups, mounts []cgroupMount) ([]string, error) {
	var out []string
	for _, c := range needed {
		p, ok := own.v1[c]
		if !ok {
			return nil, fmt.Errorf("cgroup v1: no %s hierarchy", c)
		}
		var d string
		for _, m := range mounts {
			if !m.v2 && slices.Contains(m.ctrls, c) {
				if d = dirOf(m, p); d != "" {
					break
				}
			}
		}
		if d == "" {
			return nil, fmt.Errorf("cgroup v1: this process's %s cgroup %s is not mounted here", c, p)
		}
		if err := canMake(d); err != nil {
			return nil, fmt.Errorf("cgroup v1: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// canMake checks that a cgroup can be made (and removed) in dir.
func canMake(dir string) error {
	d := filepath.Join(dir, cgroupPrefix+"probe-"+selfName())
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Remove(d)
}

func fields(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Fields(string(b))
}

func hasAll(ctrls []string) bool {
	for _, c := range needed {
		if !slices.Contains(ctrls, c) {
			return false
		}
	}
	return true
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// qemuCgroup is the cgroup of one QEMU process.
type qemuCgroup struct {
	dirs []string
	v1   bool
	fd   int // v2: the directory, for CLONE_INTO_CGROUP (-1 otherwise)
	// limit is the memory's bound, in bytes.
	limit int64
	once  sync.Once
}

// oomNote says, once QEMU has exited, whether the kernel killed a process of
// the cgroup at its memory bound ("" if not), for the VM's end.
func (g *qemuCgroup) oomNote() string {
	if g == nil || len(g.dirs) == 0 {
		return ""
	}
	file := "memory.events"
	if g.v1 {
		file = "memory.oom_control"
	}
	b, _ := os.ReadFile(filepath.Join(g.dirs[0], file))
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(l, "oom_kill "); ok && strings.TrimSpace(n) != "0" {
			return fmt.Sprintf("; the kernel killed it at its cgroup's memory bound (%d MiB: the guest's RAM and QEMU's own overhead)", g.limit>>20)
		}
	}
	return ""
}

// memoryBound is what a QEMU with a guest of memMiB may hold, in bytes.
func memoryBound(memMiB int, tcg bool) int64 {
	n := int64(memMiB + qemuOverheadMiB)
	if tcg {
		n += tcgCacheMiB
	}
	return n << 20
}

// create makes the cgroup of a QEMU whose guest has memMiB of RAM.
func (h *cgroupHost) create(memMiB int, tcg bool) (*qemuCgroup, error) {
	return h.createBounded(memoryBound(memMiB, tcg))
}

// createBounded makes a cgroup whose memory is bounded by limit bytes.
func (h *cgroupHost) createBounded(limitBytes int64) (*qemuCgroup, error) {
	if !h.available() {
		return nil, fmt.Errorf("%w: %s", errNoCgroup, h.why)
	}
	name := fmt.Sprintf("%s%s-%d", cgroupPrefix, h.self, h.seq.Add(1))
	g := &qemuCgroup{v1: h.v1, fd: -1, limit: limitBytes}
	fail := func(err error) (*qemuCgroup, error) {
		g.remove()
		return nil, fmt.Errorf("qemu: the cgroup of QEMU: %w", err)
	}
	limit := strconv.FormatInt(limitBytes, 10)
	for i, p := range h.parents {
		d := filepath.Join(p, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
		g.dirs = append(g.dirs, d)
		var settings [][2]string
		switch {
		case !h.v1:
			settings = [][2]string{{"memory.max", limit}, {"memory.swap.max", "0"}, {"pids.max", strconv.Itoa(qemuPidsMax)}}
		case i == 0:
			// memsw (memory and swap) cannot be below the memory's own bound:
			// the memory's first.
			settings = [][2]string{{"memory.limit_in_bytes", limit}}
			if h.memsw {
				settings = append(settings, [2]string{"memory.memsw.limit_in_bytes", limit})
			}
		default:
			settings = [][2]string{{"pids.max", strconv.Itoa(qemuPidsMax)}}
		}
		for _, s := range settings {
			err := os.WriteFile(filepath.Join(d, s[0]), []byte(s[1]), 0)
			if err != nil && !(s[0] == "memory.swap.max" && errors.Is(err, fs.ErrNotExist)) { // no swap in the kernel
				return fail(fmt.Errorf("%s: %w", s[0], err))
			}
		}
	}
	if !h.v1 {
		fd, err := unix.Open(g.dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		g.fd = fd
	}
	return g, nil
}

// attr makes QEMU start in the cgroup (cgroup v2).
func (g *qemuCgroup) attr(a *syscall.SysProcAttr) {
	if g != nil && g.fd >= 0 {
		a.UseCgroupFD, a.CgroupFD = true, g.fd
	}
}

// join puts the started QEMU in the cgroup (cgroup v1).
func (g *qemuCgroup) join(pid int) error {
	if g == nil || !g.v1 {
		return nil
	}
	for _, d := range g.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("qemu: joining the cgroup %s: %w", d, err)
		}
	}
	return nil
}

// remove removes the cgroup, once QEMU has exited (or never started).
func (g *qemuCgroup) remove() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		if g.fd >= 0 {
			unix.Close(g.fd)
		}
		for _, d := range g.dirs {
			removeCgroup(d)
		}
	})
}

// removeCgroup removes an empty cgroup: the kernel takes a moment to let go
// of a process that has just exited (EBUSY meanwhile).
func removeCgroup(d string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// sweepCgroups removes the cgroups in parent that a host process that is
// gone made at least minAge ago and that no process is in (an orphaned QEMU
// ends by itself once its host's channel closes; its cgroup goes at the next
// sweep).
func sweepCgroups(parent string, minAge time.Duration) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		f := strings.Split(strings.TrimPrefix(rest, "probe-"), "-")
		if len(f) < 2 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		st, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if alive := startTime(pid); alive != 0 && alive == st {
			continue
		}
		d := filepath.Join(parent, e.Name())
		info, err := os.Stat(d)
		if err != nil || time.Since(info.ModTime()) < minAge {
			continue
		}
		if len(fields(filepath.Join(d, "cgroup.procs"))) > 0 {
			continue
		}
		os.Remove(d)
	}
}
