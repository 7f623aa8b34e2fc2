package qemu

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCgroupParse: /proc/self/cgroup and the cgroup mounts of a mountinfo, on
// a cgroup v2 host and on a hybrid host (memory and pids on v1).
func TestCgroupParse(t *testing.T) {
	v2 := parseProcCgroup("0::/system.slice/app.service\n")
	if !v2.hasV2 || v2.v2 != "/system.slice/app.service" || len(v2.v1) != 0 {
		t.Errorf("v2 host: %+v", v2)
	}
	hy := parseProcCgroup("9:name=systemd:/\n8:pids:/\n4:memory:/api/55\n1:cpu,cpuacct:/x\n0::/\n")
	if !hy.hasV2 || hy.v2 != "/" || hy.v1["memory"] != "/api/55" || hy.v1["pids"] != "/" || hy.v1["cpuacct"] != "/x" {
		t.Errorf("hybrid host: %+v", hy)
	}
	ms := parseCgroupMounts(`30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 30 0:37 /ns\040root /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
`)
	if len(ms) != 3 || !slices.Equal(ms[0].ctrls, []string{"rw", "memory"}) || ms[0].point != "/sys/fs/cgroup/memory" ||
		!ms[2].v2 || ms[2].root != "/ns root" || ms[2].point != "/sys/fs/cgroup/unified" {
		t.Errorf("mounts: %+v", ms)
	}
	// Without the hierarchy mounted, or without a v2 cgroup, no place and a reason.
	if _, err := v2Parent(ownCgroups{v2: "/x", hasV2: true}, nil); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Errorf("v2Parent without a mount: %v", err)
	}
	if _, err := v1Parents(ownCgroups{v1: map[string]string{"pids": "/"}}, nil); err == nil || !strings.Contains(err.Error(), "no memory hierarchy") {
		t.Errorf("v1Parents without memory: %v", err)
	}
	// A path outside the mount's root is not shown by it.
	if d := dirOf(cgroupMount{point: "/", root: "/a"}, "/ab/c"); d != "" {
		t.Errorf("dirOf outside the root = %q", d)
	}
}

// requireCgroups returns where QEMU's cgroups are made here, or skips.
func requireCgroups(t *testing.T) *cgroupHost {
	t.Helper()
	h := probeCgroups()
	if !h.available() {
		t.Skipf("no cgroup can be made here: %s", h.why)
	}
	return h
}

// ours lists the cgroups this process made under the parents.
func ours(h *cgroupHost) []string {
	var out []string
	for _, p := range h.parents {
		m, _ := filepath.Glob(filepath.Join(p, cgroupPrefix+h.self+"-*"))
		out = append(out, m...)
	}
	return out
}

// startIn starts a real process in the cgroup, as startVM starts QEMU.
func startIn(t *testing.T, g *qemuCgroup, name string, args ...string) (*exec.Cmd, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	g.attr(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := g.join(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

// TestCgroupBoundsAndRemoval: a process started as QEMU is starts in its
// cgroup (cgroup.procs), whose bounds are the guest's RAM plus the overhead
// (plus the translation cache under TCG), no swap, 128 tasks; the cgroup is
// removed once the process has exited, and at once when it could not start
// (startVM with a QEMU binary that does not exist).
func TestCgroupBoundsAndRemoval(t *testing.T) {
	h := requireCgroups(t)
	before := ours(h)
	g, err := h.create(100, true)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := startIn(t, g, "/bin/sleep", "30")
	if err != nil {
		g.remove()
		t.Fatal(err)
	}
	want := map[string]string{"pids.max": "128"}
	limit := strconv.FormatInt((100+qemuOverheadMiB+tcgCacheMiB)<<20, 10)
	if h.v1 {
		want["memory.limit_in_bytes"] = limit
		if h.memsw {
			want["memory.memsw.limit_in_bytes"] = limit
		}
	} else {
		want["memory.max"] = limit
		if _, err := os.Stat(filepath.Join(g.dirs[0], "memory.swap.max")); err == nil {
			want["memory.swap.max"] = "0"
		}
	}
	for _, d := range g.dirs {
		if procs := fields(filepath.Join(d, "cgroup.procs")); !slices.Contains(procs, strconv.Itoa(cmd.Process.Pid)) {
			t.Errorf("%s/cgroup.procs = %v, want the process %d", d, procs, cmd.Process.Pid)
		}
		for f, v := range want {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil && strings.TrimSpace(string(b)) != v {
				t.Errorf("%s/%s = %s, want %s", d, f, strings.TrimSpace(string(b)), v)
			} else if err == nil {
				delete(want, f)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("not found in the cgroup: %v", want)
	}
	cmd.Process.Kill()
	cmd.Wait()
	g.remove()
	for _, d := range g.dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the process's end: %v", d, err)
		}
	}
	// A QEMU that cannot start leaves no cgroup.
	if _, err := startVM(&machine{QEMU: "/nonexistent/qemu-system-x86_64", Memory: 64, Accel: "tcg", cgroups: h}, vmConfig{}, nil, nil); err == nil {
		t.Fatal("startVM with a missing binary succeeded")
	}
	if after := ours(h); !slices.Equal(after, before) {
		t.Errorf("cgroups of this process: %v before, %v after", before, after)
	}
}

// TestCgroupMemoryBoundKills: a process of the cgroup that goes past its
// memory bound is killed by the kernel (no swap to go to), and the note of
// the VM's end says so.
func TestCgroupMemoryBoundKills(t *testing.T) {
	h := requireCgroups(t)
	if h.v1 && !h.memsw {
		if b, _ := os.ReadFile("/proc/swaps"); len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1 {
			t.Skip("swap is on and the v1 memory controller does not account it (no memsw): a process past its bound swaps")
		}
	}
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("%s is missing", py)
	}
	g, err := h.createBounded(48 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer g.remove()
	if n := g.oomNote(); n != "" {
		t.Fatalf("a new cgroup's note: %q", n)
	}
	cmd, err := startIn(t, g, py, "-c", "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('not killed')")
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("a process past its cgroup's bound: %v, want killed by SIGKILL", err)
	}
	if n := g.oomNote(); !strings.Contains(n, "memory bound (48 MiB") {
		t.Errorf("the note after the kill: %q", n)
	}
}

// TestCgroupStaleRemoved: a host process killed while its QEMU ran (here a
// helper process of this test, with a child in its cgroup as QEMU is) leaves
// its cgroup behind; the next probe removes it once it is older than
// staleAge, and leaves the cgroup of a live process alone.
func TestCgroupStaleRemoved(t *testing.T) {
	if os.Getenv("PYSB_CGROUP_HELPER") == "1" {
		cgroupHelper()
		return
	}
	h := requireCgroups(t)
	live, err := h.create(64, false)
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove()
	helper := exec.Command(os.Args[0], "-test.run=^TestCgroupStaleRemoved$", "-test.count=1")
	helper.Env = append(os.Environ(), "PYSB_CGROUP_HELPER=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "cgroup "); ok {
			dirs = append(dirs, d)
		}
		if sc.Text() == "ready" {
			break
		}
	}
	if len(dirs) == 0 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("the helper made no cgroup: %v", sc.Err())
	}
	helper.Process.Kill()
	helper.Wait()
	go io.Copy(io.Discard, out)
	// Its child (QEMU's stand-in) dies with it (PDEATHSIG), its cgroup stays.
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for len(fields(filepath.Join(d, "cgroup.procs"))) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("the dead helper's cgroup %s: %v", d, err)
		}
	}
	// A sweep leaves it while it is younger than staleAge (its maker might
	// be a process of another pid namespace, about to start QEMU in it).
	for _, p := range h.parents {
		sweepCgroups(p, staleAge)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("the dead helper's cgroup %s, young, after a sweep: %v", d, err)
		}
		old := time.Now().Add(-2 * staleAge)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// The next host process's probe removes it.
	if h2 := probeCgroups(); !h2.available() {
		t.Fatalf("the probe again: %s", h2.why)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dead helper's cgroup %s after the next probe: %v", d, err)
		}
	}
	for _, d := range live.dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the cgroup of a live process after the sweep: %v", err)
		}
	}
}

// cgroupHelper is the host process of TestCgroupStaleRemoved: it makes a
// cgroup, starts a child in it and waits to be killed.
func cgroupHelper() {
	h := probeCgroups()
	g, err := h.create(64, false)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cmd := exec.Command("/bin/sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.attr(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if err := g.join(cmd.Process.Pid); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for _, d := range g.dirs {
		fmt.Println("cgroup", d)
	}
	fmt.Println("ready")
	select {}
}

// TestCgroupUnprivileged: as an unprivileged user (uid 65534, as
// scripts/test runs the provider packages), the probe finds where it may make
// a cgroup, or says why it may not; without one, qemu.cgroup=on is refused
// (errNoCgroup, naming the rule) and a cgroup cannot be made. Run as root,
// the test runs itself again as uid 65534.
func TestCgroupUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		unprivileged(t, "^TestCgroupUnprivileged$")
		return
	}
	h := probeCgroups()
	if h.available() {
		// A delegated cgroup: the cgroup works as for root.
		g, err := h.create(64, true)
		if err != nil {
			t.Fatalf("the probe found %v, but: %v", h.parents, err)
		}
		g.remove()
		t.Logf("uid %d may make cgroups under %v", os.Geteuid(), h.parents)
		return
	}
	if h.why == "" {
		t.Error("no cgroup, and no reason")
	}
	t.Logf("uid %d: %s", os.Geteuid(), h)
	// The log says it once per process, with the reason.
	var log strings.Builder
	logger := slog.New(slog.NewTextHandler(&log, nil))
	h.warnUnbounded(logger)
	h.warnUnbounded(logger)
	if n := strings.Count(log.String(), "not bounded"); n != 1 || !strings.Contains(log.String(), "level=WARN") {
		t.Errorf("the warning, logged %d times: %s", n, log.String())
	}
	err := checkCgroupParam(params{cgroup: "on", cgroupRule: "<arg>: qemu.cgroup=on"}, h)
	if !errors.Is(err, errNoCgroup) || !strings.Contains(err.Error(), "qemu.cgroup=on") {
		t.Errorf("qemu.cgroup=on without a cgroup: %v, want errNoCgroup naming the rule", err)
	}
	if err := checkCgroupParam(params{cgroup: "auto"}, h); err != nil {
		t.Errorf("qemu.cgroup=auto without a cgroup: %v", err)
	}
	if _, err := h.create(64, true); !errors.Is(err, errNoCgroup) {
		t.Errorf("create without a cgroup: %v, want errNoCgroup", err)
	}
}

// unprivileged runs the test binary's tests matching run as uid 65534, from
// a copy of the binary that user can read, and fails with their output if
// they fail.
func unprivileged(t *testing.T, run string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pysb-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "qemu.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	t.Logf("as uid 65534:\n%s", out)
}

// TestCgroupV2Placement: on cgroup v2, QEMU starts in its cgroup directly
// (clone3's CLONE_INTO_CGROUP), and the probe checks that the kernel can: a
// real v2 cgroup under this process's own (which needs no controller for
// this), a process started in it, the cgroup removed after the process ended.
func TestCgroupV2Placement(t *testing.T) {
	self, _ := os.ReadFile("/proc/self/cgroup")
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	own := parseProcCgroup(string(self))
	var parent string
	for _, m := range parseCgroupMounts(string(mi)) {
		if m.v2 && own.hasV2 {
			if parent = dirOf(m, own.v2); parent != "" {
				break
			}
		}
	}
	if parent == "" {
		t.Skip("no cgroup v2 of this process is mounted here")
	}
	if err := canMake(parent); err != nil {
		t.Skipf("no cgroup v2 can be made here: %v", err)
	}
	if err := cloneInto(parent); err != nil {
		t.Fatalf("cloneInto(%s): %v", parent, err)
	}
	d := filepath.Join(parent, cgroupPrefix+selfName()+"-v2")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(d, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(d)
		t.Fatal(err)
	}
	g := &qemuCgroup{dirs: []string{d}, fd: fd}
	defer g.remove()
	cmd, err := startIn(t, g, "/bin/sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	cmd.Process.Kill()
	cmd.Wait()
	if got := parseProcCgroup(string(b)).v2; filepath.Base(got) != filepath.Base(d) {
		t.Errorf("the process's cgroup v2 is %q, want %s", got, d)
	}
	g.remove()
	if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the process's end: %v", d, err)
	}
}

// FuzzCgroupParse: /proc/self/cgroup and mountinfo of any shape parse
// without a panic, and a path found is one of the input's.
func FuzzCgroupParse(f *testing.F) {
	f.Add("0::/a/b\n4:memory:/x\n", "40 30 0:37 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n34 30 0:31 /r\\040s /m rw - cgroup cgroup rw,memory\n")
	f.Add(":::\n0::\n::x", " - \n1 2 3 4 5 - cgroup")
	f.Fuzz(func(t *testing.T, cg, mi string) {
		o := parseProcCgroup(cg)
		if o.hasV2 && !strings.Contains(cg, o.v2) {
			t.Errorf("v2 path %q not in the input", o.v2)
		}
		for _, m := range parseCgroupMounts(mi) {
			if !m.v2 && m.ctrls == nil {
				t.Errorf("a v1 mount without its options: %+v", m)
			}
		}
	})
}
