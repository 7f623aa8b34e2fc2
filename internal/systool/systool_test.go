package systool

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the unprivileged user the root tests hand directories to.
const nobody = 65534

// envChild marks the re-executed test binary that runs TestNonRootChild as
// nobody; its value is the directory the parent prepared.
const envChild = "PYSANDBOXES_SYSTOOL_TEST_CHILD"

// mkdir makes dir with exactly mode (the umask left out).
func mkdir(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plant writes an executable script name in dir that creates marker when run.
func plant(t *testing.T, dir, name, marker string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho planted > '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// base returns a fresh directory the tests build in, checked to be one the
// finder trusts (mode 0755, owned by this user, under trusted directories).
func base(t *testing.T) string {
	t.Helper()
	dir := mkdir(t, t.TempDir(), 0o755)
	probe := plant(t, dir, "probe", filepath.Join(dir, "ran"))
	if err := (checker{self: os.Geteuid()}).verify("probe", probe); err != nil {
		t.Skipf("the temporary directory is not one the finder trusts: %v", err)
	}
	if err := os.Remove(probe); err != nil {
		t.Fatal(err)
	}
	return dir
}

// systemTool returns the first of the system directories holding name
// (skipping the test when none does).
func systemTool(t *testing.T, name string) string {
	t.Helper()
	for _, d := range SystemDirs() {
		if p := filepath.Join(d, name); executable(p) {
			return p
		}
	}
	t.Skipf("no %s in %v", name, SystemDirs())
	return ""
}

// TestSystemBeforePath: a tool planted in a directory that comes first on PATH
// is passed over for the system's, and the one found is the real tool (running
// it does not run the planted one).
func TestSystemBeforePath(t *testing.T) {
	want := systemTool(t, "sleep")
	dir := base(t)
	bin := mkdir(t, filepath.Join(dir, "venv", "bin"), 0o755)
	marker := filepath.Join(dir, "ran")
	planted := plant(t, bin, "sleep", marker)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if p, err := exec.LookPath("sleep"); err != nil || p != planted {
		t.Fatalf("exec.LookPath finds %s, %v: the test plants nothing", p, err)
	}
	got, err := Find("sleep", "")
	if err != nil || got != want {
		t.Fatalf("Find(sleep) = %q, %v; want %s", got, err, want)
	}
	if err := exec.Command(got, "0").Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the planted sleep ran (%v)", err)
	}
}

// TestPathTrusted: a tool on PATH alone, in a directory of this user's (root's
// as root), is found, with a debug message saying it came from PATH; a
// symbolic link there to a system tool is found too.
func TestPathTrusted(t *testing.T) {
	dir := base(t)
	bin := mkdir(t, filepath.Join(dir, "bin"), 0o755)
	tool := plant(t, bin, "pysandboxes-tool", filepath.Join(dir, "ran"))
	if err := os.Symlink(systemTool(t, "true"), filepath.Join(bin, "abs-link")); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(dir, "real"), 0o755)
	plant(t, filepath.Join(dir, "real"), "tool", filepath.Join(dir, "ran"))
	if err := os.Symlink("../real/tool", filepath.Join(bin, "rel-link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "relative:"+bin)
	var logs bytes.Buffer
	f := Finder{System: []string{mkdir(t, filepath.Join(dir, "empty"), 0o755)},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	got, err := f.Find("pysandboxes-tool", "")
	if err != nil || got != tool {
		t.Fatalf("Find = %q, %v; want %s", got, err, tool)
	}
	if !strings.Contains(logs.String(), "found on PATH") || !strings.Contains(logs.String(), tool) {
		t.Errorf("debug log %q", logs.String())
	}
	for _, name := range []string{"abs-link", "rel-link"} {
		if got, err := f.Find(name, ""); err != nil || got != filepath.Join(bin, name) {
			t.Errorf("Find(%s) = %q, %v", name, got, err)
		}
	}
}

// TestNotFound: a tool found nowhere is ErrNotFound, whose message is the
// caller's hint when there is one; a file that is not executable is not a tool.
func TestNotFound(t *testing.T) {
	dir := base(t)
	empty := mkdir(t, filepath.Join(dir, "empty"), 0o755)
	if err := os.WriteFile(filepath.Join(empty, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", empty)
	f := Finder{System: []string{empty}}
	_, err := f.Find("pysandboxes-none", "pysandboxes-none is not installed (apt-get install it)")
	var nf *NotFoundError
	if !errors.Is(err, ErrNotFound) || !errors.As(err, &nf) || err.Error() != "pysandboxes-none is not installed (apt-get install it)" {
		t.Fatalf("got %v", err)
	}
	if _, err := f.Find("data", ""); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "data is not installed: it is in none of "+empty+", nor on PATH") {
		t.Fatalf("a file that is not executable: %v", err)
	}
	if _, err := f.Find("../bin/sh", ""); err == nil {
		t.Fatal("a path taken for a name")
	}
}

// TestPathUnsafe: a tool on PATH that another user could replace is refused,
// naming what is at fault: a group- or world-writable directory (sticky too:
// anyone may add a name there), a world-writable file, a symbolic link to a file
// in such a directory. The first match decides: a safe copy later on PATH is not
// taken instead.
func TestPathUnsafe(t *testing.T) {
	dir := base(t)
	safe := mkdir(t, filepath.Join(dir, "safe"), 0o755)
	plant(t, safe, "tool", filepath.Join(dir, "ran"))
	empty := mkdir(t, filepath.Join(dir, "empty"), 0o755)
	for _, tc := range []struct {
		name   string
		setup  func(d string) (entry string)
		reason string
	}{
		{"world-writable dir", func(d string) string { mkdir(t, d, 0o777); return d }, "is world-writable"},
		{"group-writable dir", func(d string) string { mkdir(t, d, 0o775); return d }, "is group-writable"},
		{"sticky dir", func(d string) string { mkdir(t, d, 0o777|os.ModeSticky); return d }, "is world-writable"},
		{"world-writable file", func(d string) string {
			mkdir(t, d, 0o755)
			p := filepath.Join(d, "tool")
			plant(t, d, "tool", filepath.Join(dir, "ran"))
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
			return p
		}, "is world-writable"},
		{"link into a world-writable dir", func(d string) string {
			mkdir(t, d, 0o755)
			open := mkdir(t, d+"-open", 0o777)
			plant(t, open, "real", filepath.Join(dir, "ran"))
			if err := os.Symlink(filepath.Join(open, "real"), filepath.Join(d, "tool")); err != nil {
				t.Fatal(err)
			}
			return open
		}, "is world-writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			entry := tc.setup(d)
			if _, err := os.Lstat(filepath.Join(d, "tool")); err != nil {
				plant(t, d, "tool", filepath.Join(dir, "ran"))
			}
			t.Setenv("PATH", d+":"+safe)
			_, err := Finder{System: []string{empty}}.Find("tool", "")
			var ue *UnsafeError
			if !errors.Is(err, ErrUnsafe) || !errors.As(err, &ue) {
				t.Fatalf("got %v; want an *UnsafeError", err)
			}
			if ue.Path != filepath.Join(d, "tool") || ue.Entry != entry || !strings.HasPrefix(ue.Reason, tc.reason) {
				t.Errorf("got %+v; want entry %s, reason %q", ue, entry, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "refusing "+ue.Path+" as tool: "+entry+" "+tc.reason) {
				t.Errorf("message %s", err)
			}
		})
	}
}

// TestSystemDirUntrusted: a system directory another user may write is passed
// over for the next one; a tool in it alone is refused, not reported missing.
func TestSystemDirUntrusted(t *testing.T) {
	dir := base(t)
	open := mkdir(t, filepath.Join(dir, "open"), 0o777)
	plant(t, open, "tool", filepath.Join(dir, "ran"))
	safe := mkdir(t, filepath.Join(dir, "safe"), 0o755)
	tool := plant(t, safe, "tool", filepath.Join(dir, "ran"))
	t.Setenv("PATH", "")
	if os.Geteuid() == 0 {
		if got, err := (Finder{System: []string{open, safe}}).Find("tool", ""); err != nil || got != tool {
			t.Fatalf("got %q, %v; want %s", got, err, tool)
		}
	}
	if _, err := (Finder{System: []string{open}}).Find("tool", "hint"); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("got %v; want ErrUnsafe", err)
	}
}

// TestNonRoot: a directory owned by an unprivileged user holds a tool that
// user's processes use (their own ~/.local/bin, mode 0755) and that root
// refuses (another user could have planted it). Run as root, the test checks
// root's refusal, then runs TestNonRootChild as nobody on the same directory;
// run by another user, it checks that user's own directory.
func TestNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		dir := base(t)
		bin := mkdir(t, filepath.Join(dir, ".local", "bin"), 0o755)
		tool := plant(t, bin, "tool", filepath.Join(dir, "ran"))
		t.Setenv("PATH", bin)
		if got, err := (Finder{System: []string{mkdir(t, filepath.Join(dir, "empty"), 0o755)}}).Find("tool", ""); err != nil || got != tool {
			t.Fatalf("the user's own directory: %q, %v", got, err)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is mode 0700, which nobody cannot cross.
	dir, err := os.MkdirTemp("", "pysandboxes-systool-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	mkdir(t, dir, 0o755)
	mkdir(t, filepath.Join(dir, "empty"), 0o755)
	home := mkdir(t, filepath.Join(dir, "home"), 0o755)
	bin := mkdir(t, filepath.Join(home, ".local", "bin"), 0o755)
	tool := plant(t, bin, "tool", filepath.Join(dir, "ran"))
	src, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	test := filepath.Join(dir, "systool.test")
	if err := os.WriteFile(test, src, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, ".local"), bin, tool} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	_, err = (Finder{System: []string{filepath.Join(dir, "empty")}}).Find("tool", "")
	var ue *UnsafeError
	if !errors.As(err, &ue) || ue.Entry != home || ue.Reason != "is owned by uid 65534, not root" {
		t.Fatalf("root, a directory of nobody's on PATH: %v; want it refused at %s", err, home)
	}
	cmd := exec.Command(test, "-test.run=^TestNonRootChild$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin, envChild + "=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNonRootChild") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

// TestNonRootChild is TestNonRoot's part run as nobody: nobody's own
// directory is trusted, and a group-writable one of nobody's is not.
func TestNonRootChild(t *testing.T) {
	dir := os.Getenv(envChild)
	if dir == "" {
		t.Skip("run by TestNonRoot")
	}
	if os.Geteuid() != nobody {
		t.Fatalf("uid %d", os.Geteuid())
	}
	bin := filepath.Join(dir, "home", ".local", "bin")
	f := Finder{System: []string{filepath.Join(dir, "empty")}}
	if got, err := f.Find("tool", ""); err != nil || got != filepath.Join(bin, "tool") {
		t.Fatalf("nobody's own directory: %q, %v", got, err)
	}
	if err := os.Chmod(bin, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Find("tool", ""); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("nobody's group-writable directory: %v; want ErrUnsafe", err)
	}
}

// TestRootOwnedDir: as root, a tool in a directory of root's, mode 0755, under
// the temporary directory (sticky /tmp on the way), is accepted.
func TestRootOwnedDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := base(t)
	bin := mkdir(t, filepath.Join(dir, "sbin"), 0o755)
	tool := plant(t, bin, "tool", filepath.Join(dir, "ran"))
	if got, err := (Finder{System: []string{bin}}).Find("tool", ""); err != nil || got != tool {
		t.Fatalf("as a system directory: %q, %v", got, err)
	}
	t.Setenv("PATH", bin)
	if got, err := (Finder{System: []string{filepath.Join(dir, "none")}}).Find("tool", ""); err != nil || got != tool {
		t.Fatalf("on PATH: %q, %v", got, err)
	}
}
