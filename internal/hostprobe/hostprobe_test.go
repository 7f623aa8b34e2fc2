package hostprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hostprobe/hostiletest"
	"golang.org/x/sys/unix"
)

// TestMain turns the test binary into the hostile "python3" when it is started
// under that name (see hostiletest).
func TestMain(m *testing.M) {
	if hostiletest.Is() {
		os.Exit(hostiletest.Main())
	}
	os.Exit(m.Run())
}

// hostileAnswer is what the hostile program answers besides its results.
var hostileAnswer = map[string]any{"version": []int{3, 12, 1}}

// requireConfined skips where probes run unconfined (no Landlock, or a build
// without cgo), saying why.
func requireConfined(t *testing.T) {
	t.Helper()
	if ok, why := Confined(); !ok {
		t.Skipf("probes cannot be confined here: %s", why)
	}
}

// TestHostileProbeConfined: a hostile python3 probed as the needs and pylayer
// probes run it (-I -S -c, empty environment) gets its answer out, and nothing
// else: every write, connection, datagram, signal and ptrace is refused, with the
// errno of the layer that refuses it.
func TestHostileProbeConfined(t *testing.T) {
	requireConfined(t)
	path, check := hostiletest.Plant(t, t.TempDir(), hostileAnswer)
	out, err := Run(context.Background(), Request{Path: path, Args: []string{path, "-I", "-S", "-c", "query"}})
	check()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	var ans struct {
		Version []int             `json:"version"`
		Results map[string]string `json:"results"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("answer %q: %v", out, err)
	}
	want := map[string]string{
		"write": "EACCES", "write_tmp": "EACCES", "mkdir": "EACCES", // Landlock: read-only tree
		"tcp":      "EACCES", // Landlock: no TCP port granted
		"udp":      "EPERM",  // seccomp: no UDP socket
		"unix":     "EPERM",  // seccomp: no Unix socket of the host
		"abstract": "EPERM",  // seccomp (Landlock's scope would refuse the connect too)
		"kill":     "EPERM",  // Landlock: signals scoped
		"ptrace":   "EPERM",  // seccomp and Landlock
	}
	for k, v := range want {
		if got := ans.Results[k]; got != v {
			t.Errorf("%s: got %s, want %s", k, got, v)
		}
	}
	t.Logf("uid %d: %v", os.Geteuid(), ans.Results)
}

// TestUntrustedRefusedWithoutConfinement: where probes cannot be confined, a
// program in a directory others may write is refused, naming it, the reason and
// what to do; it never runs.
func TestUntrustedRefusedWithoutConfinement(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	path, check := hostiletest.Plant(t, dir, hostileAnswer)
	_, err := run(context.Background(), Request{Path: path}, config{why: "no Landlock (test)"})
	check()
	var ue *UntrustedError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUntrusted) {
		t.Fatalf("got %v, want an *UntrustedError", err)
	}
	for _, s := range []string{path, "writable by group or others", "no Landlock (test)", "Landlock ABI 6"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// TestTrustRules: the trust check without confinement, case by case.
func TestTrustRules(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if ok, why := Trusted(py, nil); !ok {
		t.Errorf("%s: not trusted: %s", py, why)
	}
	if ok, why := Trusted(py, []string{"/usr/bin"}); ok || !strings.Contains(why, "which a sandbox may write") {
		t.Errorf("%s under a writable /usr/bin: trusted=%v %q", py, ok, why)
	}
	dir := t.TempDir() // beneath TMPDIR: /tmp is writable by others
	f := filepath.Join(dir, "python3")
	os.WriteFile(f, nil, 0o755)
	os.Symlink(f, filepath.Join(dir, "link"))
	if ok, why := Trusted(filepath.Join(dir, "link"), nil); ok || why == "" {
		t.Errorf("a link into a temporary directory: trusted=%v %q", ok, why)
	}
	if ok, why := Trusted(dir, nil); ok || why == "" {
		t.Errorf("a directory: trusted=%v %q", ok, why)
	}
	// A trusted link to an untrusted target is not trusted.
	if os.Geteuid() == 0 {
		safe := filepath.Join("/root", fmt.Sprintf(".hostprobe-test-%d", os.Getpid()))
		if err := os.Symlink(f, safe); err == nil {
			defer os.Remove(safe)
			if ok, why := Trusted(safe, nil); ok || !strings.Contains(why, "writable by group or others") {
				t.Errorf("a link in /root to a file in %s: trusted=%v %q", dir, ok, why)
			}
		}
	}
}

// TestTrustedRunsWithoutConfinement: where probes cannot be confined, a trusted
// interpreter is still probed.
func TestTrustedRunsWithoutConfinement(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	out, err := run(context.Background(), Request{Path: py, Args: []string{py, "-I", "-S", "-c", "import sys; print(sys.version_info[0])"}}, config{why: "test"})
	if err != nil || strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("got %q, %v", out, err)
	}
}

// interpreters are the real interpreters of the machine (those present).
func interpreters(t testing.TB) []string {
	var out []string
	for _, p := range []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"} {
		if unix.Access(p, unix.X_OK) == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("no Python interpreter found")
	}
	return out
}

// TestRealInterpretersConfined: the real interpreters answer under confinement,
// from their directories and the standard library, and their own attempt to
// write is refused.
func TestRealInterpretersConfined(t *testing.T) {
	requireConfined(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	query := `import sys, sysconfig, json
try:
    open(sys.argv[1], "w")
    w = "ok"
except OSError as e:
    w = type(e).__name__
print(json.dumps({"v": list(sys.version_info[:2]), "stdlib": sysconfig.get_paths()["stdlib"], "write": w}))`
	for _, py := range interpreters(t) {
		out, err := Run(context.Background(), Request{Path: py, Args: []string{py, "-I", "-S", "-c", query, filepath.Join(dir, "w")}})
		if err != nil {
			t.Errorf("%s: %v", py, err)
			continue
		}
		var a struct {
			V      []int  `json:"v"`
			Stdlib string `json:"stdlib"`
			Write  string `json:"write"`
		}
		if err := json.Unmarshal(out, &a); err != nil || len(a.V) != 2 || a.V[0] != 3 || a.Stdlib == "" {
			t.Errorf("%s answered %q (%v)", py, out, err)
		}
		if a.Write != "PermissionError" {
			t.Errorf("%s: its write got %s, want PermissionError", py, a.Write)
		}
	}
}

// TestProbeBounds: more output than allowed, a failing program and a deadline are
// errors that say so; a deadline kills the program, and a probe's end its whole
// process tree.
func TestProbeBounds(t *testing.T) {
	requireConfined(t)
	_, err := Run(context.Background(), Request{Path: "/usr/bin/head", Args: []string{"head", "-c", "100000", "/dev/zero"}, MaxOutput: 1000})
	if err == nil || !strings.Contains(err.Error(), "exceeds 1000 bytes") {
		t.Errorf("too much output: %v", err)
	}
	_, err = Run(context.Background(), Request{Path: "/bin/sh", Args: []string{"sh", "-c", "echo nope >&2; exit 3"}})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status.ExitStatus() != 3 || ee.Stderr != "nope" {
		t.Errorf("failing program: %v", err)
	}
	_, err = Run(context.Background(), Request{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	// A descendant left behind is killed with the probe.
	out, err := Run(context.Background(), Request{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"}})
	if err != nil {
		t.Fatalf("background child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if pid <= 0 {
		t.Fatalf("background child: answered %q", out)
	} else if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("the probe's child %d outlived it: kill(0) gave %v", pid, err)
	}
	_, err = Run(context.Background(), Request{Path: "python3"})
	if err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("relative path: %v", err)
	}
}

// BenchmarkProbe measures a Python probe (-I -S -c of a small query): confined,
// unconfined (a trusted interpreter where confinement is not available: the
// supervisor without stages), and a bare exec.Command (how the probes ran before).
func BenchmarkProbe(b *testing.B) {
	py := interpreters(b)[0]
	req := Request{Path: py, Args: []string{py, "-I", "-S", "-c", "import sys, sysconfig, json; print(json.dumps(sysconfig.get_paths()))"}}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(py, req.Args[1:]...)
			cmd.Env, cmd.Dir = []string{}, "/"
			if _, err := cmd.Output(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name string
		c    func() config
	}{{"confined", current}, {"unconfined", func() config { return config{why: "benchmark"} }}} {
		b.Run(bc.name, func(b *testing.B) {
			c := bc.c()
			if bc.name == "confined" && c.stages == nil {
				b.Skip(c.why)
			}
			for b.Loop() {
				if _, err := run(context.Background(), req, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
