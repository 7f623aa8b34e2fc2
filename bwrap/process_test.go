package bwrap_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/proctest"
)

// TestHostProcessesInvisible: the sandbox has its own pid namespace: /proc lists
// only its own processes, and the host's (the test itself) cannot be signalled
// (ESRCH).
func TestHostProcessesInvisible(t *testing.T) {
	sb := sandbox(t, nil)
	host := os.Getpid()
	out := py(t, sb, tryPrelude+`
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("pids", pids)
print("count", len(pids))
attempt("kill-host", lambda: os.kill(int(sys.argv[1]), 0))
attempt("kill-1", lambda: os.kill(1, 0))
`, strconv.Itoa(host))
	expectLine(t, out, "kill-host ESRCH")
	if !strings.Contains(out, "count 2") && !strings.Contains(out, "count 3") {
		t.Errorf("the sandbox sees more than its own processes:\n%s", out)
	}
	if strings.Contains(out, " "+strconv.Itoa(host)+",") || strings.Contains(out, " "+strconv.Itoa(host)+"]") {
		t.Errorf("the host's pid is listed:\n%s", out)
	}
}

// TestTreeKilledOnCancel: cancelling the context ends the program and every
// process it started (background ones too), and Wait reports the cancellation.
func TestTreeKilledOnCancel(t *testing.T) {
	sb := sandbox(t, []string{"expose-ro=/usr/bin"})
	ctx, cancel := context.WithCancel(context.Background())
	cmd := sb.Command(ctx, "/bin/sh", "-c", `sleep 1000 & sleep 1001 & (sh -c 'sleep 1002' &) ; echo started; wait`)
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
	defer cancel()
	var sleeps []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if sleeps = sleepers(); len(sleeps) >= 3 {
			break
		}
	}
	if len(sleeps) < 3 {
		t.Fatalf("expected 3 sleeps, found %v", sleeps)
	}
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

// sleepers lists the "sleep 100x" processes of the host.
func sleepers() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if c := strings.ReplaceAll(string(b), "\x00", " "); strings.HasPrefix(c, "sleep 100") {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestSignalReachesProgram: Cmd.Signal delivers the signal to the program itself
// (a SIGTERM trapped by the shell), not to bwrap.
func TestSignalReachesProgram(t *testing.T) {
	sb := sandbox(t, nil)
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

// TestExitStatusPassesThrough: the program's exit code is Wait's.
func TestExitStatusPassesThrough(t *testing.T) {
	sb := sandbox(t, nil)
	err := sb.Command(context.Background(), "/bin/sh", "-c", "exit 42").Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.Status.ExitStatus() != 42 {
		t.Fatalf("got %v", err)
	}
}

// TestSignalDeathReported: a program killed by a signal is reported so (the
// launcher's 128+N exit status is turned back into the signal).
func TestSignalDeathReported(t *testing.T) {
	sb := sandbox(t, nil)
	err := sb.Command(context.Background(), "/bin/sh", "-c", "kill -XCPU $$").Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || !ee.Status.Signaled() || ee.Status.Signal() != syscall.SIGXCPU {
		t.Fatalf("got %v", err)
	}
}

// TestMissingProgram: a program that does not exist is an error saying so, and
// bwrap is not started.
func TestMissingProgram(t *testing.T) {
	sb := sandbox(t, nil)
	err := sb.Command(context.Background(), "/no/such/program").Run()
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("got %v, want ErrNotExist", err)
	}
}
