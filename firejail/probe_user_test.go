package firejail

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/systool"
)

// nobodyUID is the user firejail never lets use it.
const nobodyUID = 65534

// TestProbeRefusesNobody: as uid 65534 (nobody), the probe's error leads with
// the cause (firejail never lets nobody use it) and the remedy, is a *UserError
// and ErrUserNotAllowed (and fs.ErrPermission) through wrapping, and no
// capability is claimed. Run as root, the test runs itself as uid 65534 and
// checks that it passed there.
func TestProbeRefusesNobody(t *testing.T) {
	switch os.Getuid() {
	case nobodyUID:
	case 0:
		asNobody(t, "TestProbeRefusesNobody")
		return
	default:
		t.Skipf("runs as root (which runs it as uid %d) or as uid %d, not uid %d", nobodyUID, nobodyUID, os.Getuid())
	}
	if _, err := exec.LookPath("firejail"); err != nil {
		t.Skip("firejail is not installed")
	}
	p := &Provider{}
	err := p.Probe(context.Background())
	var ue *UserError
	if !errors.As(err, &ue) || !ue.Never || ue.UID != nobodyUID {
		t.Fatalf("probe as uid %d: %v; want a *UserError for nobody", nobodyUID, err)
	}
	wrapped := &wrapErr{err}
	if !errors.Is(wrapped, ErrUserNotAllowed) || !errors.Is(wrapped, fs.ErrPermission) || !errors.As(wrapped, &ue) {
		t.Errorf("%v is not ErrUserNotAllowed and fs.ErrPermission through wrapping", err)
	}
	msg := err.Error()
	for _, want := range []string{"run as root", usersFile, "sudo firecfg --add-users NAME", "another provider"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q: %s", want, msg)
		}
	}
	if lead := "firejail never lets the user " + ue.User + " (uid 65534) use it"; !strings.HasPrefix(msg, lead) {
		t.Errorf("the error does not lead with the cause %q: %s", lead, msg)
	}
	if c := p.Capabilities(); c != 0 {
		t.Errorf("capabilities %s as nobody", c)
	}
}

type wrapErr struct{ err error }

func (w *wrapErr) Error() string {
	return "os-sandbox firejail is not available here: " + w.err.Error()
}
func (w *wrapErr) Unwrap() error { return w.err }

// asNobody runs the test binary's test name as uid 65534, from a copy that user
// can execute, and fails unless that test passed there (a skip is reported as
// a skip).
func asNobody(t *testing.T, name string) {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "firejail.test")
	copyFile(t, self, bin)
	cmd := exec.Command(bin, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP: "+name):
		t.Skipf("as uid %d: %s", nobodyUID, out)
	case err != nil || !strings.Contains(string(out), "--- PASS: "+name):
		t.Fatalf("as uid %d: %v\n%s", nobodyUID, err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFirejailRefusalRecognised: firejail's own refusal of a user (run as
// nobody when the test runs as root) is recognised as a *UserError that leads
// with the cause and keeps firejail's words.
func TestFirejailRefusalRecognised(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("runs firejail as uid 65534, which needs root")
	}
	bin, err := exec.LookPath("firejail")
	if err != nil {
		t.Skip("firejail is not installed")
	}
	cmd := exec.Command(bin, "--quiet", "--noprofile", "--net=none", "--", "/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("firejail ran as nobody: %s", out)
	}
	rerr := refusal(string(out), "nobody", nobodyUID)
	var ue *UserError
	if !errors.As(rerr, &ue) || !ue.Never || ue.Refusal == "" {
		t.Fatalf("firejail's refusal %q: %v; want a *UserError for nobody", out, rerr)
	}
	if msg := rerr.Error(); !strings.HasPrefix(msg, "firejail never lets the user nobody (uid 65534) use it") ||
		!strings.Contains(msg, "firejail says: Error: the user is not allowed to use Firejail.") {
		t.Errorf("message %s", msg)
	}
	other := refusal(string(out), "alice", 1001)
	if !errors.As(other, &ue) || ue.Never || ue.File != usersFile ||
		!strings.HasPrefix(other.Error(), "firejail does not let the user alice (uid 1001) use it: "+usersFile+" exists and does not list the user; add a line \"alice\"") {
		t.Errorf("for a listed-out user: %v", other)
	}
	if refusal("Error: cannot mount /proc", "alice", 1001) != nil {
		t.Error("another failure taken for a refusal of the user")
	}
}

// TestProbeFirejailNotExecutable: a firejail on PATH that this user may not
// execute (restricted to a group) is explained as such, not as a missing
// firejail.
func TestProbeFirejailNotExecutable(t *testing.T) {
	dir := t.TempDir()
	fj := filepath.Join(dir, "firejail")
	if err := os.WriteFile(fj, []byte("#!/bin/sh\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	p := &Provider{tools: systool.Finder{System: []string{t.TempDir()}}}
	err := p.Probe(context.Background())
	var ue *UserError
	if !errors.As(err, &ue) || ue.Binary != fj || !errors.Is(err, ErrUserNotAllowed) {
		t.Fatalf("probe: %v; want a *UserError naming %s", err, fj)
	}
	if !strings.Contains(err.Error(), "cannot run "+fj+", which only its owner and the group "+ue.Group+" may execute: add the user to that group") {
		t.Errorf("message %s", err)
	}
	if p.Capabilities() != 0 {
		t.Errorf("capabilities %s", p.Capabilities())
	}
}
