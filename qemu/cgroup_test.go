package qemu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/qemu"
)

// qemuChildren are the QEMU processes this test process started.
func qemuChildren() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) > 1 && s[i+1:j] == "qemu-system-x86" && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

// qemuArg is the value of QEMU's option name in its command line.
func qemuArg(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(b), "\x00")
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	t.Fatalf("QEMU %d has no %s: %q", pid, name, args)
	return ""
}

// checkQEMUCgroup checks that QEMU pid is in cgroups of its own bounding
// its memory by the guest's RAM and the overhead, and returns them.
func checkQEMUCgroup(t *testing.T, pid int) []string {
	t.Helper()
	dirs, why := qemu.CgroupsOf(pid)
	if len(dirs) == 0 {
		t.Skipf("QEMU runs in no cgroup of its own here: %s", why)
	}
	mem, err := strconv.Atoi(qemuArg(t, pid, "-m"))
	if err != nil {
		t.Fatal(err)
	}
	tcg := strings.HasPrefix(qemuArg(t, pid, "-accel"), "tcg,tb-size=")
	want := strconv.FormatInt(qemu.MemoryBound(mem, tcg), 10)
	var memory, pids bool
	for _, d := range dirs {
		if procs := strings.Fields(readFile(t, filepath.Join(d, "cgroup.procs"))); !slices.Equal(procs, []string{strconv.Itoa(pid)}) {
			t.Errorf("%s/cgroup.procs = %v, want QEMU (%d) alone", d, procs, pid)
		}
		for _, f := range []string{"memory.max", "memory.limit_in_bytes"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				memory = true
				if got := strings.TrimSpace(string(b)); got != want {
					t.Errorf("%s/%s = %s, want %s (a guest of %d MiB, TCG %v)", d, f, got, want, mem, tcg)
				}
			}
		}
		if b, err := os.ReadFile(filepath.Join(d, "pids.max")); err == nil {
			pids = true
			if got := strings.TrimSpace(string(b)); got != "128" {
				t.Errorf("%s/pids.max = %s, want 128", d, got)
			}
		}
	}
	if !memory || !pids {
		t.Errorf("QEMU's cgroups %v: memory bounded %v, tasks bounded %v", dirs, memory, pids)
	}
	return dirs
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gone checks that the directories are removed: Wait returns once the
// last program's QEMU has exited and its cgroup is removed.
func gone(t *testing.T, what string, dirs []string) {
	t.Helper()
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("QEMU's cgroup %s is still there after %s (%v)", d, what, err)
		}
	}
}

// TestQEMUInItsCgroup: the shared VM's QEMU runs in a cgroup of its own
// (alone in cgroup.procs; memory bounded by the guest's RAM, the translation
// cache and the overhead; 128 tasks). A VM of its own then ends twice: its
// QEMU exits when its last program ends, and is killed (SIGKILL, as a crash)
// while a program runs; each time QEMU's cgroup is gone when the program's
// Wait returns.
func TestQEMUInItsCgroup(t *testing.T) {
	sandbox(t)
	sharedQEMU := qemuChildren()
	if len(sharedQEMU) == 0 {
		t.Fatal("no QEMU process of this test")
	}
	for _, pid := range sharedQEMU {
		checkQEMUCgroup(t, pid)
	}
	pol, _ := writePolicy(t, t.TempDir(), "env=FOO=bar")
	sb, err := pysandboxes.New(context.Background(), pol, pysandboxes.WithProvider(qemu.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// start runs a program that waits for its stdin in a VM of its own, and
	// returns it and its QEMU.
	start := func() (*pysandboxes.Cmd, func() error, int) {
		cmd := sb.Command(context.Background(), python, "-c", "import sys; sys.stdin.read()")
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for _, pid := range qemuChildren() {
			if !slices.Contains(sharedQEMU, pid) {
				return cmd, w.Close, pid
			}
		}
		w.Close()
		cmd.Wait()
		t.Fatal("the program's VM has no QEMU of its own")
		return nil, nil, 0
	}
	cmd, end, pid := start()
	dirs := checkQEMUCgroup(t, pid)
	end()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	gone(t, "the VM's normal end", dirs)
	cmd, end, pid = start()
	defer end()
	dirs = checkQEMUCgroup(t, pid)
	syscall.Kill(pid, syscall.SIGKILL)
	if err := cmd.Wait(); err == nil {
		t.Error("the program of a VM whose QEMU was killed ended well")
	}
	gone(t, "QEMU was killed", dirs)
}
