package unshare_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
	"github.com/pysandboxes/pysandboxes/internal/seccomp"
)

// TestProgramConfinement: the program holds no capability, runs with
// no_new_privs and (with cgo) the seccomp filter, sees exactly the policy's
// environment, and its working directory is the caller's when exposed.
func TestProgramConfinement(t *testing.T) {
	dir := providertest.TempDir(t)
	sb := sandbox(t, []string{"expose-ro=" + dir, "env=GREETING=hello"})
	cmd := sb.Command(context.Background(), providertest.Python(t), "-I", "-c", `
import os
for l in open("/proc/self/status"):
    if l.split(":")[0] in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
        print(l.split(":")[0], l.split()[1])
print("env", sorted(k for k in os.environ if k not in ("LC_CTYPE",)))
print("cwd", os.getcwd())
`)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	o := string(out)
	for _, want := range []string{"CapEff 0000000000000000", "CapPrm 0000000000000000", "CapBnd 0000000000000000",
		"CapAmb 0000000000000000", "NoNewPrivs 1", "env ['GREETING']", "cwd " + dir} {
		providertest.ExpectLine(t, o, want)
	}
	if seccomp.Available() == nil {
		providertest.ExpectLine(t, o, "Seccomp 2")
	}
}

// TestWorkingDirectoryNotExposed: a working directory the sandbox does not see
// becomes "/".
func TestWorkingDirectoryNotExposed(t *testing.T) {
	sb := sandbox(t, nil)
	cmd := sb.Command(context.Background(), "/bin/sh", "-c", "pwd")
	cmd.Dir = providertest.TempDir(t)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "/" {
		t.Fatalf("pwd: %q, %v", out, err)
	}
}

// TestScriptAndLinks: a "#!" script runs (its interpreter is found through the
// links of merged /usr), a program named through a symbolic link runs, and a
// missing program is ENOENT, not a sandbox failure.
func TestScriptAndLinks(t *testing.T) {
	dir := providertest.TempDir(t)
	script := filepath.Join(dir, "hello.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"hello $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pyscript := filepath.Join(dir, "hello.py")
	if err := os.WriteFile(pyscript, []byte("#!/usr/bin/python3 -I\nimport sys; print('py', sys.version_info[0])\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb := sandbox(t, []string{"expose-ro=" + dir})
	out, err := providertest.Run(t, sb, script, "world")
	if err != nil || strings.TrimSpace(out) != "hello world" {
		t.Errorf("script: %q, %v", out, err)
	}
	out, err = providertest.Run(t, sb, pyscript)
	if err != nil || strings.TrimSpace(out) != "py 3" {
		t.Errorf("python script: %q, %v", out, err)
	}
	_, err = providertest.Run(t, sb, filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing program: %v", err)
	}
}

// TestDevices: the devices of /dev work (null, zero, urandom), nothing else of the
// host's /dev is there, /dev/shm is private and writable, and /dev/fd links to the
// program's descriptors.
func TestDevices(t *testing.T) {
	sb := sandbox(t, nil)
	out := providertest.Py(t, sb, providertest.TryPrelude+`
attempt("null", lambda: open("/dev/null", "w").write("x"))
attempt("zero", lambda: open("/dev/zero", "rb").read(4))
attempt("urandom", lambda: len(open("/dev/urandom", "rb").read(16)))
attempt("dev", lambda: sorted(os.listdir("/dev")))
attempt("shm", lambda: open("/dev/shm/x", "w").write("x"))
attempt("fd", lambda: os.path.exists("/dev/fd/0"))
attempt("mknod", lambda: os.mknod("/dev/shm/n", 0o600 | 0o020000, os.makedev(1, 3)))
attempt("sda", lambda: open("/dev/vda", "rb"))
import multiprocessing
lock = multiprocessing.Lock()
print("semaphore", lock.acquire())
`)
	providertest.ExpectLine(t, out, "null OK 1")
	providertest.ExpectLine(t, out, "zero OK b'\\x00\\x00\\x00\\x00'")
	providertest.ExpectLine(t, out, "urandom OK 16")
	providertest.ExpectLine(t, out, "dev OK ['fd', 'full', 'null', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero']")
	providertest.ExpectLine(t, out, "shm OK 1")
	providertest.ExpectLine(t, out, "fd OK True")
	providertest.ExpectLine(t, out, "mknod EPERM")
	providertest.ExpectLine(t, out, "sda ENOENT")
	providertest.ExpectLine(t, out, "semaphore True")
}

// TestSignalsAndLimits: Cmd.Signal reaches the program (its pid is the host's
// view), the exit status passes through, and the resource limits apply.
func TestSignalsAndLimits(t *testing.T) {
	sb := sandbox(t, nil, pysandboxes.WithLimits(pysandboxes.Limits{OpenFiles: 17, FileSize: 1 << 20}))
	out := providertest.Sh(t, sb, "ulimit -n; ulimit -f")
	if f := strings.Fields(out); len(f) != 2 || f[0] != "17" || f[1] != "2048" {
		t.Errorf("limits: %q", out)
	}
	cmd := sb.Command(context.Background(), "/bin/sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.01 2>/dev/null || :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The program's command line appears once its exec is done.
	var b []byte
	var err error
	for i := 0; i < 100; i++ {
		if b, err = os.ReadFile("/proc/" + strconv.Itoa(cmd.Pid()) + "/cmdline"); err != nil || len(b) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil || !strings.HasPrefix(string(b), "/bin/sh") {
		t.Errorf("Pid() %d is not the program on the host: %q, %v", cmd.Pid(), b, err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := cmd.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if cmd.ExitCode() != 7 {
		t.Errorf("exit code %d (%v), want 7", cmd.ExitCode(), err)
	}
}
