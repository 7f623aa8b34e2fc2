package pysandboxes_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

// treeScript starts two sleepers (one escaping to a session of its own), prints the
// pids of the shell and of both sleepers, and waits.
const treeScript = `sleep 1000 & a=$!; setsid sleep 1000 & b=$!; echo $$ $a $b; wait`

// startTree runs treeScript and returns the command and the three pids.
func startTree(t *testing.T, ctx context.Context, sb *pysandboxes.Sandbox) (*pysandboxes.Cmd, []int) {
	t.Helper()
	cmd := sb.Command(ctx, "/bin/sh", "-c", treeScript)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pids := parsePids(t, line)
	if len(pids) != 3 {
		t.Fatalf("want 3 pids, got %q", line)
	}
	go io.Copy(io.Discard, out)
	return cmd, pids
}

func TestSubprocessTreeKilledOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sb := newSandbox(ctx, t)
	cmd, pids := startTree(t, ctx, sb)
	cancel()
	err := cmd.Wait()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want an ExitError for context.Canceled", err)
	}
	if !ee.Status.Signaled() || ee.Status.Signal() != syscall.SIGKILL {
		t.Errorf("status = %v, want killed by SIGKILL", ee.Status)
	}
	if ee.ShellCode() != 137 {
		t.Errorf("ShellCode = %d, want 137", ee.ShellCode())
	}
	waitGone(t, 5*time.Second, pids...)
}

func TestSubprocessTreeKilledOnTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	sb := newSandbox(ctx, t)
	cmd, pids := startTree(t, ctx, sb)
	err := cmd.Wait()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want context.DeadlineExceeded", err)
	}
	waitGone(t, 5*time.Second, pids...)
}

func TestSubprocessDescendantsKilledWhenProgramExits(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t)
	// The shell exits at once, leaving a background sleeper and a setsid one.
	out, err := sb.Command(ctx, "/bin/sh", "-c", `sleep 1000 >/dev/null & a=$!; setsid sleep 1000 >/dev/null & echo $a $!`).Output()
	if err != nil {
		t.Fatal(err)
	}
	pids := parsePids(t, string(out))
	waitGone(t, 5*time.Second, pids...)
	if kids := childrenOf(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
}

func TestSubprocessTreeKilledWhenHostDies(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$", "--", "/bin/sh", "-c", treeScript)
	host.Env = append(os.Environ(), "PYSB_TEST_HOST=1")
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	host.Stderr = os.Stderr
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		host.Process.Kill()
		host.Wait()
		t.Fatalf("host said nothing: %v", err)
	}
	pids := parsePids(t, strings.TrimSpace(line))
	if len(pids) != 3 {
		t.Fatalf("host said %q", line)
	}
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d not running before the host dies", p)
		}
	}
	host.Process.Kill() // the host dies without any chance to clean up
	host.Wait()
	waitGone(t, 5*time.Second, pids...)
}

func TestSubprocessExitStatus(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t)
	for _, tc := range []struct {
		script string
		code   int // ExitCode
		shell  int // ShellCode
		sig    syscall.Signal
	}{
		{"exit 0", 0, 0, 0},
		{"exit 3", 3, 3, 0},
		{"exit 255", 255, 255, 0},
		{"kill -TERM $$", -1, 143, syscall.SIGTERM},
		{"kill -KILL $$", -1, 137, syscall.SIGKILL},
	} {
		cmd := sb.Command(ctx, "/bin/sh", "-c", tc.script)
		err := cmd.Run()
		if tc.shell == 0 {
			if err != nil {
				t.Errorf("%q: %v", tc.script, err)
			}
			continue
		}
		var ee *pysandboxes.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%q: err = %v, want *ExitError", tc.script, err)
		}
		if ee.ExitCode() != tc.code || ee.ShellCode() != tc.shell || cmd.ExitCode() != tc.code {
			t.Errorf("%q: ExitCode %d ShellCode %d Cmd.ExitCode %d, want %d %d", tc.script, ee.ExitCode(), ee.ShellCode(), cmd.ExitCode(), tc.code, tc.shell)
		}
		if tc.sig != 0 && ee.Status.Signal() != tc.sig {
			t.Errorf("%q: signal %v, want %v", tc.script, ee.Status.Signal(), tc.sig)
		}
		if ee.Err != nil {
			t.Errorf("%q: Err = %v, want nil (the program ended on its own)", tc.script, ee.Err)
		}
	}
}

func TestSubprocessStartErrors(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t)
	err := sb.Command(ctx, "/nonexistent/program").Run()
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing program: %v, want an error wrapping ENOENT", err)
	}
	err = sb.Command(ctx, "no-such-program-anywhere").Run()
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("unknown name: %v, want exec.ErrNotFound", err)
	}
	plain := t.TempDir() + "/plain"
	if err := os.WriteFile(plain, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = sb.Command(ctx, plain).Run()
	if !errors.Is(err, syscall.EACCES) {
		t.Errorf("not executable: %v, want EACCES", err)
	}
	if kids := childrenOf(os.Getpid()); len(kids) != 0 {
		t.Errorf("children left: %v", kids)
	}
}

func TestSubprocessSignalReachesProgram(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t)
	cmd := sb.Command(ctx, "/bin/sh", "-c", `trap 'echo got-usr1; exit 7' USR1; echo ready; while :; do sleep 0.05; done`)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if l, _ := r.ReadString('\n'); l != "ready\n" {
		t.Fatalf("got %q", l)
	}
	if err := cmd.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	l, _ := r.ReadString('\n')
	err := cmd.Wait()
	if l != "got-usr1\n" || cmd.ExitCode() != 7 {
		t.Errorf("line %q exit %d err %v, want got-usr1 and 7", l, cmd.ExitCode(), err)
	}
}
