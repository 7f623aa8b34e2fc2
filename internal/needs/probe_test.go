package needs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hostprobe"
	"github.com/pysandboxes/pysandboxes/policy"
)

// TestMain turns the test binary into a hostile "python3" when started under
// that name (see TestHostilePythonProbedConfined).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "python3" {
		os.Exit(hostilePython())
	}
	os.Exit(m.Run())
}

// hostilePython reads its targets from hostile.json next to it, tries to write
// the marker, connect to the test's TCP listener and signal the test, then
// answers like an interpreter whose directory is /usr/lib.
func hostilePython() int {
	var c struct {
		Marker, TCP string
		PID         int
	}
	data, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), "hostile.json"))
	if err != nil || json.Unmarshal(data, &c) != nil {
		return 3
	}
	os.WriteFile(c.Marker, []byte("ran on the host"), 0o644)
	if conn, err := net.DialTimeout("tcp", c.TCP, 2*time.Second); err == nil {
		conn.Write([]byte("escaped"))
		conn.Close()
	}
	syscall.Kill(c.PID, syscall.SIGUSR1)
	fmt.Println(`{"paths": ["/usr/lib"], "prefixes": ["/usr"], "sys_path": [], "site": []}`)
	return 0
}

// TestHostilePythonProbedConfined: an ELF binary named python3 planted in a
// directory (as a sandboxed program could in a virtual environment's bin/) is
// asked for its directories confined: its answer is read, and its write,
// connection and signal reach nothing. Where probes cannot be confined, it is
// refused (its directory is writable by others), and never runs.
func TestHostilePythonProbedConfined(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(dir, "python3")
	if err := os.WriteFile(py, data, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reached := make(chan bool, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
			reached <- true
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	marker := filepath.Join(dir, "marker")
	conf, _ := json.Marshal(map[string]any{"Marker": marker, "TCP": l.Addr().String(), "PID": os.Getpid()})
	os.WriteFile(filepath.Join(dir, "hostile.json"), conf, 0o644)

	var r Resolver
	info, err := r.askPython(context.Background(), py)
	confined, why := hostprobe.Confined()
	switch {
	case confined && err != nil:
		t.Fatalf("probe: %v", err)
	case confined:
		found := false
		for _, n := range info.needs {
			found = found || n.Path == "/usr/lib" && n.Dir
		}
		if !found {
			t.Errorf("the answer was not used: %v", info.needs)
		}
	case !errors.Is(err, hostprobe.ErrUntrusted):
		t.Fatalf("without confinement (%s): got %v, want a refusal", why, err)
	}
	time.Sleep(100 * time.Millisecond) // what got through has arrived by now
	if _, err := os.Lstat(marker); err == nil {
		t.Error("the interpreter wrote its marker on the host")
	}
	select {
	case <-reached:
		t.Error("the interpreter connected to the test's listener")
	case s := <-sigs:
		t.Errorf("the interpreter signalled the test: %v", s)
	default:
	}
}

// TestRealPythonsProbedConfined: the real interpreters are still asked (not the
// disk cache) and answer their standard library.
func TestRealPythonsProbedConfined(t *testing.T) {
	n := 0
	for _, py := range []string{"/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"} {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		n++
		var r Resolver
		info, err := r.askPython(context.Background(), py)
		if err != nil {
			t.Errorf("%s: %v", py, err)
			continue
		}
		found := false
		for _, need := range info.needs {
			if need.Dir && strings.Contains(need.Path, "/lib/python3.") {
				_, serr := os.Stat(filepath.Join(need.Path, "os.py"))
				found = found || serr == nil
			}
		}
		if !found {
			t.Errorf("%s: no standard library in %v", py, paths(info.needs))
		}
	}
	if n == 0 {
		t.Skip("no Python interpreter found")
	}
}

// TestWritableOf: only the expose-rw= directories are writable by the sandbox.
func TestWritableOf(t *testing.T) {
	got := WritableOf([]policy.Expose{{Path: "/usr", Mode: policy.ReadOnly}, {Path: "/srv/app", Mode: policy.ReadWrite}})
	if len(got) != 1 || got[0] != "/srv/app" {
		t.Errorf("got %v", got)
	}
}
