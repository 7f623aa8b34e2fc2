package hostprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain turns the test binary into the hostile "python3" when it is started
// under that name (a copy made by hostile below).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "python3" {
		os.Exit(hostileMain())
	}
	os.Exit(m.Run())
}

// hostileConf is what the hostile program attacks, read from hostile.json next to
// it (its environment is empty).
type hostileConf struct {
	Marker   string `json:"marker"`
	TCP      string `json:"tcp"`
	UDP      string `json:"udp"`
	Unix     string `json:"unix"`
	Abstract string `json:"abstract"`
	PID      int    `json:"pid"`
}

// hostileMain tries to write, connect, send and signal, then prints a plausible
// answer with what each attempt got.
func hostileMain() int {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), "hostile.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var c hostileConf
	if err := json.Unmarshal(data, &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	res := map[string]string{}
	res["write"] = errName(os.WriteFile(c.Marker, []byte("ran outside the sandbox"), 0o644))
	res["write_tmp"] = errName(os.WriteFile(filepath.Join(os.TempDir(), "hostprobe-hostile-"+strconv.Itoa(os.Getpid())), nil, 0o644))
	res["mkdir"] = errName(os.Mkdir(c.Marker+".d", 0o755))
	dial := func(network, addr string) string {
		conn, err := net.DialTimeout(network, addr, 2*time.Second)
		if err == nil {
			_, err = conn.Write([]byte("escaped"))
			conn.Close()
		}
		return errName(err)
	}
	res["tcp"] = dial("tcp", c.TCP)
	res["udp"] = dial("udp", c.UDP)
	res["unix"] = dial("unix", c.Unix)
	res["abstract"] = dial("unix", "@"+c.Abstract)
	res["kill"] = errName(syscall.Kill(c.PID, syscall.SIGUSR1))
	res["ptrace"] = errName(unix.PtraceAttach(c.PID))
	out, _ := json.Marshal(map[string]any{"version": []int{3, 12, 1}, "results": res})
	fmt.Println(string(out))
	return 0
}

// errName names the errno of err ("ok" for nil).
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// hostile copies the test binary as dir/python3, with its targets: a TCP, a UDP
// and a Unix listener of the test, an abstract Unix socket, the marker it must
// not write and the test's pid. check asserts that none of them was reached.
func hostile(t *testing.T, dir string) (path string, check func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "python3")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	ux, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o777)
	abstract := fmt.Sprintf("pysandboxes-hostprobe-%d-%d", os.Getpid(), time.Now().UnixNano())
	ab, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	reached := make(chan string, 8)
	for name, l := range map[string]net.Listener{"tcp": tcp, "unix": ux, "abstract": ab} {
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
				reached <- name
			}
		}()
	}
	go func() {
		buf := make([]byte, 64)
		if _, _, err := udp.ReadFrom(buf); err == nil {
			reached <- "udp"
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	marker := filepath.Join(dir, "marker")
	conf, _ := json.Marshal(hostileConf{Marker: marker, TCP: tcp.Addr().String(), UDP: udp.LocalAddr().String(),
		Unix: sock, Abstract: abstract, PID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(dir, "hostile.json"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	check = func() {
		t.Helper()
		// Give a connection or a signal that did get through the time to arrive
		// (the attempts all ended before the probe did).
		time.Sleep(100 * time.Millisecond)
		signal.Stop(sigs)
		tcp.Close()
		udp.Close()
		ux.Close()
		ab.Close()
		for _, p := range []string{marker, marker + ".d"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("the probe wrote %s", p)
			}
		}
		select {
		case s := <-sigs:
			t.Errorf("the probe signalled the host: %v", s)
		default:
		}
		close(reached)
		for name := range reached {
			t.Errorf("the probe reached the test's %s listener", name)
		}
	}
	return path, check
}

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
	path, check := hostile(t, t.TempDir())
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
	path, check := hostile(t, dir)
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
