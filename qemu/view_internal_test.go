package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

// TestViewRefusesAnotherDirectory: the helper that mounts the ignore= filter
// for QEMU mounts it only over the very directory the filter serves: a
// directory replaced since (another inode under the path), or a path through
// a symbolic link, makes it exit with viewExit before any mount, naming the
// directory, and QEMU is not started.
func TestViewRefusesAnotherDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the helper makes a mount namespace: it runs as root")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	marker := filepath.Join(dir, "qemu-ran")
	for _, c := range []struct{ name, path, id, want string }{
		{"replaced", real, fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), real + " is no longer the directory the filter serves"},
		{"through a link", link, fmt.Sprintf("%d:%d", st.Dev, st.Ino), link + ": too many levels of symbolic links"},
	} {
		t.Run(c.name, func(t *testing.T) {
			helperRefuses(t, []string{"1", c.path, c.id, "3", "ro", "-"}, []*os.File{devNull}, marker, c.want)
		})
	}
}

// TestViewWithStateMadeNow: a VM whose saved state is missing first boots
// one to make it (never through the filter: its shares are empty), then the
// sandbox's own VM, through the filter.
func TestViewWithStateMadeNow(t *testing.T) {
	if err := hideview.Available(); err != nil {
		t.Skipf("the filter of ignore= paths does not work here: %v", err)
	}
	p := &Provider{}
	if err := p.host().err; err != nil {
		t.Skipf("the qemu provider cannot run here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("X"), 0o644)
	// A memory size of this test's own, so that its saved state is made here.
	pol, err := policy.NewBuilder().Rule("expose-ro", dir).Rule("ignore", ".env").Rule("qemu.memory", "296M").Build(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.compile(ctx, pol, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.served) != 1 || c.served[0].Path != dir {
		t.Fatalf("served: %v, want %s", c.served, dir)
	}
	key, err := stateKey(c.machine())
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(c.h.cache, "state-"+key)
	removeState := func() {
		os.Remove(state)
		os.Remove(state + ".json")
	}
	removeState()
	t.Cleanup(removeState)
	e, err := c.boot(ctx, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("booting after making the saved state: %v", err)
	}
	defer func() {
		e.v.kill()
		e.v.wait()
	}()
	if _, err := os.Stat(state); err != nil {
		t.Errorf("the saved state was not made: %v", err)
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", e.v.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, " "+dir+" ") && strings.Contains(l, "fuse.pysandboxes") {
			found = true
		}
	}
	if !found {
		t.Errorf("QEMU does not read %s through the filter:\n%s", dir, mi)
	}
}

// TestJailRefusesBadSpec: the helper that makes QEMU's jail refuses what it
// cannot make exactly (a path that is not clean and absolute, one that is
// missing, a /proc outside a pid namespace of its own): it exits with
// viewExit, naming the reason, and does not execute its command.
func TestJailRefusesBadSpec(t *testing.T) {
	if err := jailAvailable(); err != nil {
		t.Skipf("QEMU's jail cannot be made here: %v", err)
	}
	marker := filepath.Join(t.TempDir(), "qemu-ran")
	for _, c := range []struct{ name, spec, want string }{
		{"relative", `{"binds":[{"path":"usr"}]}`, `QEMU's jail: "usr": not a clean absolute path`},
		{"unclean", `{"binds":[{"path":"/usr/../etc"}]}`, `QEMU's jail: "/usr/../etc": not a clean absolute path`},
		{"missing", `{"binds":[{"path":"/nonexistent-pysandboxes"}]}`, "QEMU's jail: /nonexistent-pysandboxes: no such file or directory"},
		{"not a device", `{"binds":[{"path":"/usr/bin/env","dev":true}]}`, "QEMU's jail: /usr/bin/env: not a character device"},
		{"proc", `{"binds":[{"path":"/usr","ro":true}],"proc":true}`, "QEMU's jail: /proc: QEMU is not in a pid namespace of its own"},
		{"link", `{"binds":[],"links":{"a/b":"usr"}}`, `QEMU's jail: link "a/b": not a name`},
	} {
		t.Run(c.name, func(t *testing.T) { helperRefuses(t, []string{"0", c.spec}, nil, marker, c.want) })
	}
}

// helperRefuses runs the helper (viewMarker) with args, then a command that
// would make marker, and asserts its refusal: exit status viewExit, want in
// what it says, the command not run.
func helperRefuses(t *testing.T, args []string, files []*os.File, marker, want string) {
	t.Helper()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = append(append([]string{viewMarker}, args...), "/bin/touch", marker)
	cmd.ExtraFiles = files
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != viewExit {
		t.Fatalf("the helper: %v (%s), want exit status %d", err, errb.String(), viewExit)
	}
	if !strings.Contains(errb.String(), want) {
		t.Errorf("the helper said %q, want %q", errb.String(), want)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the helper executed its command")
	}
}
