package providertest

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
)

// Scenarios runs the scenarios every launcher-based namespace provider (bwrap,
// firejail) must pass, as subtests of t: processes (pid namespace, tree kill on
// cancel, signals, exit status, a missing program), no leaks after 50 runs, and
// resource limits.
func Scenarios(t *testing.T, name string) {
	for _, s := range []struct {
		name string
		run  func(*testing.T, string)
	}{
		{"HostProcessesInvisible", scenHostProcessesInvisible},
		{"TreeKilledOnCancel", scenTreeKilledOnCancel},
		{"SignalReachesProgram", scenSignalReachesProgram},
		{"ExitStatusPassesThrough", scenExitStatusPassesThrough},
		{"SignalDeathReported", scenSignalDeathReported},
		{"MissingProgram", scenMissingProgram},
		{"NoLeaksAfter50Runs", scenNoLeaksAfter50Runs},
		{"ResourceLimitsApplied", scenResourceLimitsApplied},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, name) })
	}
}

// scenHostProcessesInvisible: the sandbox has its own pid namespace: /proc lists
// only its own processes, and the host's (the test itself) cannot be signalled
// (ESRCH).
func scenHostProcessesInvisible(t *testing.T, name string) {
	sb := Sandbox(t, name, nil)
	host := os.Getpid()
	out := Py(t, sb, TryPrelude+`
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("pids", pids)
print("count", len(pids))
attempt("kill-host", lambda: os.kill(int(sys.argv[1]), 0))
attempt("kill-1", lambda: os.kill(1, 0))
`, strconv.Itoa(host))
	ExpectLine(t, out, "kill-host ESRCH")
	if !strings.Contains(out, "count 2") && !strings.Contains(out, "count 3") {
		t.Errorf("the sandbox sees more than its own processes:\n%s", out)
	}
	if strings.Contains(out, " "+strconv.Itoa(host)+",") || strings.Contains(out, " "+strconv.Itoa(host)+"]") {
		t.Errorf("the host's pid is listed:\n%s", out)
	}
}

// scenTreeKilledOnCancel: TreeKilledOnCancel.
func scenTreeKilledOnCancel(t *testing.T, name string) { TreeKilledOnCancel(t, name) }

// TreeKilledOnCancel: cancelling the context ends the program and every
// process it started (background ones, and an orphan in a session of its own),
// and Wait reports the cancellation (an *ExitError that is context.Canceled).
func TreeKilledOnCancel(t *testing.T, name string) {
	sb := Sandbox(t, name, []string{"expose-ro=/usr/bin"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The sleeps' durations are this test's own: no other process of the host has them.
	var b [3]byte
	rand.Read(b[:])
	mark := fmt.Sprintf("sleep 1%07d", int(b[0])<<16|int(b[1])<<8|int(b[2]))
	cmd := sb.Command(ctx, "/bin/sh", "-c", `m=$1; sleep ${m}1 & sleep ${m}2 & (sh -c "sleep ${m}3" &) ; (setsid sleep ${m}4 &) ; echo started; wait`,
		"sh", strings.TrimPrefix(mark, "sleep "))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "started" {
		t.Fatalf("got %q", line)
	}
	var sleeps []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if sleeps = sleepers(mark); len(sleeps) >= 4 {
			break
		}
	}
	if len(sleeps) < 4 {
		t.Fatalf("expected 4 sleeps, found %v", sleeps)
	}
	// Every process of the sandbox's pid namespace goes, its first one too.
	sleeps = append(sleeps, InPidNamespaceOf(sleeps[0])...)
	cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *pysandboxes.ExitError
		if !errors.As(err, &ee) || !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want an ExitError for the cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after cancel")
	}
	proctest.WaitGone(t, 5*time.Second, sleeps...)
}

// InPidNamespaceOf lists the host's processes in the pid namespace of pid,
// none when it is this process's own. The namespace's first process is listed
// even when its /proc/<pid>/ns cannot be read (a supervisor that made itself
// not dumpable, to a host without privileges): it is found as the ancestor of
// pid that is process 1 of that namespace.
func InPidNamespaceOf(pid int) []int {
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if self, _ := os.Readlink("/proc/self/ns/pid"); err != nil || ns == self {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid"); l == ns && proctest.Alive(n) {
			out = append(out, n)
		}
	}
	if init := namespaceInit(pid); init > 0 && !slices.Contains(out, init) && proctest.Alive(init) {
		out = append(out, init)
	}
	return out
}

// namespaceInit is the process 1 of the pid namespace of pid, as the host
// sees it (0 when it cannot be told): up the parents of pid while they lie at
// the same depth of pid namespaces (a process's parent lies in its namespace,
// or for the namespace's process 1 in an ancestor), the one whose pid there is 1.
// /proc/<pid>/status, which tells that, is readable for any process.
func namespaceInit(pid int) int {
	depth := len(nsPids(pid))
	if depth < 2 {
		return 0
	}
	for p := pid; p > 1; {
		ids := nsPids(p)
		if len(ids) != depth {
			return 0
		}
		if ids[depth-1] == "1" {
			return p
		}
		p = parentOf(p)
	}
	return 0
}

// nsPids is the NSpid line of /proc/<pid>/status: the pids of the process in
// its pid namespace and every ancestor namespace up to this process's.
func nsPids(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// parentOf is the parent of pid (0 when it cannot be read).
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	return 0
}

// sleepers lists the processes of the host whose command line starts with mark.
func sleepers(mark string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if c := strings.ReplaceAll(string(b), "\x00", " "); strings.HasPrefix(c, mark) {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// scenSignalReachesProgram: Cmd.Signal delivers the signal to the program itself
// (a SIGTERM trapped by the shell), not to the launcher (bwrap, firejail).
func scenSignalReachesProgram(t *testing.T, name string) {
	sb := Sandbox(t, name, nil)
	cmd := sb.Command(context.Background(), "/bin/sh", "-c", `trap 'echo got-term; exit 7' TERM; echo ready; while :; do read x; done`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if line, _ := r.ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("got %q", line)
	}
	if err := cmd.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("\n")) // wake the read so the trap runs
	line, _ := r.ReadString('\n')
	err = cmd.Wait()
	if strings.TrimSpace(line) != "got-term" || cmd.ExitCode() != 7 {
		t.Fatalf("line %q, exit %d, err %v", line, cmd.ExitCode(), err)
	}
}

// scenExitStatusPassesThrough: the program's exit code is Wait's.
func scenExitStatusPassesThrough(t *testing.T, name string) {
	sb := Sandbox(t, name, nil)
	err := sb.Command(context.Background(), "/bin/sh", "-c", "exit 42").Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.Status.ExitStatus() != 42 {
		t.Fatalf("got %v", err)
	}
}

// scenSignalDeathReported: a program killed by a signal is reported so (the
// launcher's 128+N exit status is turned back into the signal).
func scenSignalDeathReported(t *testing.T, name string) {
	sb := Sandbox(t, name, nil)
	err := sb.Command(context.Background(), "/bin/sh", "-c", "kill -XCPU $$").Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || !ee.Status.Signaled() || ee.Status.Signal() != syscall.SIGXCPU {
		t.Fatalf("got %v", err)
	}
}

// scenMissingProgram: a program that does not exist is an error saying so, and
// the launcher is not started.
func scenMissingProgram(t *testing.T, name string) {
	sb := Sandbox(t, name, nil)
	err := sb.Command(context.Background(), "/no/such/program").Run()
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}

// scenNoLeaksAfter50Runs: NoLeaks over 50 runs.
func scenNoLeaksAfter50Runs(t *testing.T, name string) { NoLeaks(t, name, 50) }

// NoLeaks: no descriptor, process, mount or temporary file is left after n
// confined runs (20 with -short) of programs that exit, fail, leave a busy
// child behind, are cancelled, or write to a file of the host, in a sandbox
// with an ignore= rule (so that every kind of argument is made); the ignored
// file is as it was.
func NoLeaks(t *testing.T, name string, n int) {
	if testing.Short() {
		n = min(n, 20)
	}
	tmp := TempDir(t)
	t.Setenv("TMPDIR", tmp)
	data := filepath.Join(tmp, "data")
	WriteFile(t, filepath.Join(data, ".env"), "SECRET")
	sb := ignoring(t, name, "expose-rw="+data, "ignore=.env")
	ctx := context.Background()
	if err := sb.Command(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	before, err := proctest.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	mountsBefore := HostMounts(t)
	for i := range n {
		var cmd *pysandboxes.Cmd
		switch i % 5 {
		case 0:
			cmd = sb.Command(ctx, "/bin/true")
		case 1:
			cmd = sb.Command(ctx, "/bin/sh", "-c", "exit 0")
		case 2:
			cmd = sb.Command(ctx, "/bin/sh", "-c", "exit 3")
		case 3:
			cmd = sb.Command(ctx, "/bin/sh", "-c", `/bin/sh -c 'exec /bin/sh -c "while :; do :; done"' & exit 0`)
			cmd.Stdout = os.Stderr
		case 4:
			cctx, cancel := context.WithCancel(ctx)
			c := sb.Command(cctx, "/bin/sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cancel()
			c.Wait()
			continue
		}
		if err := cmd.Run(); (err != nil) != (i%5 == 2) {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if after, _ := proctest.OpenFDs(); after != before {
		t.Errorf("descriptors: %d before, %d after %d runs", before, after, n)
	}
	if kids := proctest.Children(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if left := Settled("", func() string { return NewMounts(t, mountsBefore) }); left != "" {
		t.Errorf("mounts of the host left after %d runs:\n%s", n, left)
	}
	if b, _ := os.ReadFile(filepath.Join(data, ".env")); string(b) != "SECRET" {
		t.Errorf("the ignored file changed: %q", b)
	}
}

// scenResourceLimitsApplied: the sandbox's resource limits reach the program
// (through the launcher, which the supervisor starts with them): the kernel reports them,
// and an allocation beyond the address-space limit fails.
func scenResourceLimitsApplied(t *testing.T, name string) {
	sb := Sandbox(t, name, nil, pysandboxes.WithLimits(pysandboxes.Limits{
		AddressSpace: 512 << 20, OpenFiles: 64, FileSize: 1 << 20, CPUTime: 30 * time.Second,
	}))
	out := Py(t, sb, `
import resource
for name in ("RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU"):
    print(name, *resource.getrlimit(getattr(resource, name)))
try:
    b = bytearray(1 << 30)
    print("alloc OK")
except MemoryError:
    print("alloc MemoryError")
`)
	for _, want := range []string{"RLIMIT_AS 536870912 536870912", "RLIMIT_NOFILE 64 64", "RLIMIT_FSIZE 1048576 1048576",
		"RLIMIT_CPU 30 31", "alloc MemoryError"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
