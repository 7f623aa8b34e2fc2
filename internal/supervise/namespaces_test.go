package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testRoot is a small sandbox root: /usr read-only (with Debian's merged-usr
// links), /dev/null, a new /proc, a private /tmp, dir (read-write) with its
// secret masked, and a file written by the supervisor.
func testRoot(dir string) *Namespaces {
	return &Namespaces{UID: os.Getuid(), GID: os.Getgid(), Loopback: true, Root: []RootOp{
		{Kind: OpBind, Path: "/usr", Source: "/usr", Flags: RootReadOnly},
		{Kind: OpSymlink, Path: "/bin", Source: "usr/bin"},
		{Kind: OpSymlink, Path: "/lib", Source: "usr/lib"},
		{Kind: OpSymlink, Path: "/lib64", Source: "usr/lib64"},
		{Kind: OpDir, Path: "/dev", Mode: 0o755},
		{Kind: OpBind, Path: "/dev/null", Source: "/dev/null", Flags: RootReadOnly | RootDevices | RootFile | RootNoExec},
		{Kind: OpProc, Path: "/proc"},
		{Kind: OpTmpfs, Path: "/tmp", Mode: 0o1777, Size: 1 << 20},
		{Kind: OpDir, Path: "/etc", Mode: 0o755},
		{Kind: OpFile, Path: "/etc/hosts", Data: []byte("127.0.0.1 localhost\n"), Mode: 0o644},
		{Kind: OpDir, Path: filepath.Dir(dir), Mode: 0o755},
		{Kind: OpBind, Path: dir, Source: dir},
		{Kind: OpMask, Path: dir + "/secret"},
		{Kind: OpChdir, Path: dir},
	}}
}

// requireNamespaces skips a test when user namespaces cannot be made here.
func requireNamespaces(t testing.TB) {
	t.Helper()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: CloneFlags,
		UidMappings: []syscall.SysProcIDMap{{HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{HostID: os.Getgid(), Size: 1}}}
	if err := cmd.Run(); err != nil {
		t.Skipf("namespaces unavailable here: %v", err)
	}
}

// nsDir makes a directory every mapped uid can reach, with a secret file.
func nsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "visible"), []byte("visible"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNamespacesRoot: under both supervisors, the program runs as root of a user
// namespace (mapped to the host's user), as pid 2 of a pid namespace whose pid 1
// is the supervisor, in the root the spec built: read-only except its private
// /tmp and the read-write directory, the secret masked, only the loopback
// interface. The reported pid is the program's pid in the host.
func TestNamespacesRoot(t *testing.T) {
	requireNamespaces(t)
	forEachImpl(t, func(t *testing.T, im impl) {
		dir := nsDir(t)
		script := `echo "pid=$$ cwd=$(pwd)"; id -u; cat /proc/self/uid_map | tr -s ' '
ls /
cat visible; echo
cat secret; echo "secret=$?"
touch /x 2>/dev/null; echo "root-write=$?"
touch /usr/x 2>/dev/null; echo "usr-write=$?"
echo t > /tmp/t && echo tmp-write=ok
echo w > written && echo dir-write=ok
cat /etc/hosts
cat /proc/1/cmdline | tr '\0' ' '; echo
ls /sys/class/net 2>&1 | head -1; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`
		spec := Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Namespaces: testRoot(dir),
			Stages: []Stage{{Kind: StageNoNewPrivs}, {Kind: StageDropCapabilities}}}
		cmd, h, err := command(spec, "", []string{"PATH=/usr/bin:/bin"}, "", nil, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		pid, err := h.Start(context.Background(), cmd)
		if err != nil {
			cmd.Wait()
			t.Fatalf("start: %v\n%s", err, out.String())
		}
		// The reported pid is the host's: its innermost pid is 2.
		nspid := nspidOf(pid)
		cmd.Wait()
		ws, err := h.Status()
		if err != nil || ws.ExitStatus() != 0 {
			t.Fatalf("status %v, %v:\n%s", ws, err, out.String())
		}
		o := out.String()
		// The program is pid 2 under the C supervisor (the Go one's threads take
		// pids too).
		if im.c && nspid != "" && nspid != "2" {
			t.Errorf("reported pid %d is pid %s in the namespace, want 2", pid, nspid)
		}
		if nspid != "" && !strings.Contains(out.String(), "pid="+nspid+" ") {
			t.Errorf("the reported pid %d (pid %s in the namespace) is not the program's:\n%s", pid, nspid, out.String())
		}
		for _, want := range []string{" cwd=" + dir + "\n", "\n0\n", "0 " + strconv.Itoa(os.Getuid()) + " 1",
			"bin\ndev\netc\nlib\nlib64\nproc\ntmp\nusr\n", "visible\n", "secret=1", "root-write=1", "usr-write=1",
			"tmp-write=ok", "dir-write=ok", "127.0.0.1 localhost", innerMarker(im) + " " + version, "\nlo\n"} {
			if !strings.Contains(o, want) {
				t.Errorf("output lacks %q:\n%s", want, o)
			}
		}
		if strings.Contains(o, "SECRET") {
			t.Errorf("the masked file leaked:\n%s", o)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "written")); string(b) != "w\n" {
			t.Errorf("the read-write directory was not written: %q", b)
		}
	})
}

// nspidOf returns the innermost pid of a host process ("" once it is gone).
func nspidOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "NSpid:" {
			return f[len(f)-1]
		}
	}
	return ""
}

// TestNamespacesReady: with Wait, the program starts only after ready returned;
// ready sees the sandbox's namespaces through the supervisor's pid; an error of
// ready is returned and the program never runs.
func TestNamespacesReady(t *testing.T) {
	requireNamespaces(t)
	forEachImpl(t, func(t *testing.T, im impl) {
		dir := nsDir(t)
		ns := testRoot(dir)
		ns.Wait = true
		marker := filepath.Join(dir, "ran")
		spec := Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo ran > " + marker}, Namespaces: ns}
		for _, fail := range []bool{false, true} {
			os.Remove(marker)
			cmd, h, err := command(spec, "", nil, "", nil, im.marker)
			if err != nil {
				t.Fatal(err)
			}
			var sawNet bool
			boom := errors.New("boom")
			_, err = h.StartReady(context.Background(), cmd, func(ctx context.Context, sup int) error {
				mine, _ := os.Readlink("/proc/self/ns/net")
				theirs, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", sup))
				sawNet = theirs != "" && theirs != mine
				if _, err := os.Stat(marker); err == nil {
					t.Error("the program ran before the go-ahead")
				}
				if fail {
					return boom
				}
				return nil
			})
			if !sawNet {
				t.Error("ready did not see the sandbox's network namespace")
			}
			if fail {
				if !errors.Is(err, boom) {
					t.Errorf("StartReady = %v, want boom", err)
				}
				h.Close() // the lifeline ends: the supervisor exits
				cmd.Wait()
				if _, err := os.Stat(marker); err == nil {
					t.Error("the program ran although ready failed")
				}
				continue
			}
			if err != nil {
				cmd.Wait()
				t.Fatalf("StartReady: %v", err)
			}
			cmd.Wait()
			if ws, err := h.Status(); err != nil || ws.ExitStatus() != 0 {
				t.Fatalf("status %v, %v", ws, err)
			}
			h.Close()
			if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
				t.Errorf("the program did not run: %q", b)
			}
		}
	})
}

// TestNamespacesTerminateAndSignals: Terminate kills the whole namespace (a
// process in a session of its own included); a signal the program sends to the
// supervisor (pid 1) is ignored.
func TestNamespacesTerminateAndSignals(t *testing.T) {
	requireNamespaces(t)
	forEachImpl(t, func(t *testing.T, im impl) {
		dir := nsDir(t)
		script := "setsid sleep 1000 & echo $!; exec sleep 1000"
		if im.c {
			// The Go supervisor cannot tell who sent a signal; the C one ignores
			// those sent from inside the sandbox.
			script = fmt.Sprintf("kill -%d 1; %s", SignalTerminate, script)
		}
		spec := Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Namespaces: testRoot(dir)}
		cmd, h, err := command(spec, "", []string{"PATH=/usr/bin:/bin"}, "", nil, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		out, _ := cmd.StdoutPipe()
		pid, err := h.Start(context.Background(), cmd)
		if err != nil {
			t.Fatal(err)
		}
		var line [16]byte
		n, _ := out.Read(line[:])
		if n == 0 {
			t.Fatal("no output")
		}
		time.Sleep(50 * time.Millisecond)
		if im.c && syscall.Kill(pid, 0) != nil {
			t.Fatal("a signal from inside the sandbox ended it")
		}
		if err := Terminate(cmd.Process); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		ws, err := h.Status()
		if err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("status %v, %v", ws, err)
		}
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			t.Errorf("program %d survived", pid)
		}
	})
}

// TestNamespacesHostDeath: the whole sandbox dies with its host.
func TestNamespacesHostDeath(t *testing.T) {
	requireNamespaces(t)
	forEachImpl(t, func(t *testing.T, im impl) {
		host := exec.Command(os.Args[0], "-test.run=^$")
		host.Env = append(os.Environ(), "PYSB_SUPERVISE_HOST="+im.marker, "PYSB_SUPERVISE_NS="+nsDir(t))
		out, _ := host.StdoutPipe()
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		var sup, prog int
		buf := make([]byte, 128)
		n, _ := out.Read(buf)
		if f := strings.Fields(string(buf[:n])); len(f) >= 2 {
			sup, _ = strconv.Atoi(f[0])
			prog, _ = strconv.Atoi(f[1])
		}
		if sup <= 0 || prog <= 0 {
			host.Process.Kill()
			host.Wait()
			t.Fatalf("host said %q", buf[:n])
		}
		host.Process.Kill()
		host.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for _, p := range []int{sup, prog} {
			for syscall.Kill(p, 0) == nil && !zombie(p) {
				if time.Now().After(deadline) {
					syscall.Kill(p, syscall.SIGKILL)
					t.Fatalf("process %d survived its host", p)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
}

// TestNamespacesRootErrors: a root that cannot be built is a start error without
// errno (never taken for a missing program), with the same words from both
// supervisors; a missing program is ENOENT.
func TestNamespacesRootErrors(t *testing.T) {
	requireNamespaces(t)
	dir := nsDir(t)
	link := filepath.Join(dir, "link")
	os.Symlink("/etc", link)
	for _, tc := range []struct {
		op    RootOp
		want  string
		errno syscall.Errno
	}{
		{RootOp{Kind: OpBind, Path: "/x", Source: "/nonexistent"}, "cannot build the sandbox's root: open /nonexistent: no such file or directory", 0},
		{RootOp{Kind: OpBind, Path: "/x", Source: link}, "cannot build the sandbox's root: open " + link + ": a symbolic link is on the path", 0},
		{RootOp{Kind: OpBind, Path: "/x", Source: "/usr", Flags: RootFile}, "cannot build the sandbox's root: /usr is a directory now (the tree changed)", 0},
		{RootOp{Kind: OpMask, Path: "/nowhere"}, "cannot build the sandbox's root: open /nowhere to mask it: no such file or directory", 0},
		{RootOp{Kind: OpDir, Path: "/a/b"}, "cannot build the sandbox's root: open the parent of /a/b: no such file or directory", 0},
	} {
		forEachImpl(t, func(t *testing.T, im impl) {
			ns := testRoot(dir)
			ns.Root = append(ns.Root, tc.op)
			cmd, h, err := command(Spec{Path: "/bin/true", Namespaces: ns}, "", nil, "", nil, im.marker)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			_, err = h.Start(context.Background(), cmd)
			cmd.Wait()
			var se *StartError
			if !errors.As(err, &se) || !strings.HasPrefix(se.Msg, tc.want) || se.Errno != tc.errno {
				t.Errorf("%s: %#v, want %q", tc.op, err, tc.want)
			}
		})
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		cmd, h, err := command(Spec{Path: "/usr/bin/nonexistent", Namespaces: testRoot(dir)}, "", nil, "", nil, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		_, err = h.Start(context.Background(), cmd)
		cmd.Wait()
		if !errors.Is(err, syscall.ENOENT) {
			t.Errorf("missing program: %v", err)
		}
	})
}

// TestNamespacesWireRoundTrip: the namespaces of a spec decode as encoded.
func TestNamespacesWireRoundTrip(t *testing.T) {
	ns := testRoot("/d\tx")
	ns.Wait = true
	spec := Spec{Path: "/bin/true", Args: []string{"true"}, HostPID: 7, StatusFD: 3, Namespaces: ns}
	b, err := encodeWire(&spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeWire(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if ok, cerr := cParse(b); ok && cerr != nil {
		t.Errorf("C parser: %v", cerr)
	}
	want := &wireNS{flags: nsWait | nsLoopback, lifeline: 5, uid: os.Getuid(), gid: os.Getgid(), root: ns.Root}
	if !reflect.DeepEqual(got.ns, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got.ns, want)
	}
	for _, bad := range []RootOp{{Kind: 0, Path: "/"}, {Kind: OpRebind + 1, Path: "/"}, {Kind: OpDir, Path: "x"},
		{Kind: OpBind, Path: "/x", Source: "y"}, {Kind: OpSymlink, Path: "/x"}, {Kind: OpDir, Path: "/x", Mode: 0o10000}} {
		spec.Namespaces = &Namespaces{Root: []RootOp{bad}}
		if _, err := encodeWire(&spec, nil); err == nil {
			t.Errorf("%+v encoded", bad)
		}
	}
}

// nsBadSpecs are namespace records both supervisors refuse.
func nsBadSpecs() []struct{ wire, want string } {
	p := fmt.Sprintf("H\t%d\t0\nP\t/bin/true\nA\ttrue\n", os.Getpid())
	return []struct{ wire, want string }{
		{p + "U\t4\t5\t0\t0\n.\n", "line 4: number out of range"},
		{p + "U\t1\t2147483648\t0\t0\n.\n", "line 4: number out of range"},
		{p + "U\t1\t5\t4294967295\t0\n.\n", "line 4: number out of range"},
		{p + "U\t1\t5\t0\t4294967295\n.\n", "line 4: number out of range"},
		{p + "U\t1\t5\n.\n", "line 4: too few fields"},
		{p + "U\t0\t5\t0\t0\nM\t0\t0\t0\t0\nT\t/\n.\n", "line 5: unknown root operation"},
		{p + "U\t0\t5\t0\t0\nM\t11\t0\t0\t0\nT\t/\n.\n", "line 5: unknown root operation"},
		{p + "U\t0\t5\t0\t0\nM\t1\t4096\t0\t0\nT\t/\n.\n", "line 5: number out of range"},
		{p + "U\t0\t5\t0\t0\nM\t1\t0\t64\t0\nT\t/\n.\n", "line 5: number out of range"},
		{p + "U\t0\t5\t0\t0\nM\t1\t0\t0\t0\n.\n", "line 6: expected the path record T"},
		{p + "U\t0\t5\t0\t0\nM\t1\t0\t0\t0\nT\tx\n.\n", "line 6: not an absolute path"},
		{p + "U\t0\t5\t0\t0\nM\t3\t0\t0\t0\nT\t/x\n.\n", "line 7: expected the source record F"},
		{p + "U\t0\t5\t0\t0\nM\t3\t0\t0\t0\nT\t/x\nF\ty\n.\n", "line 7: not an absolute path"},
		{p + "U\t0\t5\t0\t0\nM\t2\t0\t0\t0\nT\t/x\nF\t\n.\n", "line 7: empty symbolic link target"},
		{p + "U\t0\t5\t0\t0\nM\t6\t0\t0\t0\nT\t/x\n.\n", "line 7: expected the data record D"},
		{p + "U\t0\t5\t0\t0\nM\t6\t0\t0\t0\nT\t/x\nD\t0g\n.\n", "line 7: field 1: bad hex"},
		{p + "U\t0\t5\t0\t0\nM\t1\t0\t0\t0\nT\t/x\nF\t/y\n.\n", "line 7: unexpected record"},
		{p + "U\t0\t5\t0\t0\nT\t/x\n.\n", "line 5: unexpected record"},
		{p + "S\tno-new-privs\nU\t0\t5\t0\t0\n.\n", "line 5: unexpected record"},
	}
}

// TestNamespacesBadSpecs: both parsers refuse the same namespace records with the
// same message.
func TestNamespacesBadSpecs(t *testing.T) {
	for i, tc := range nsBadSpecs() {
		_, err := decodeWire([]byte(tc.wire))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%d: decodeWire(%q) = %v, want %q", i, tc.wire, err, tc.want)
		}
		if ok, cerr := cParse([]byte(tc.wire)); ok && (cerr == nil || cerr.Error() != tc.want) {
			t.Errorf("%d: C parse(%q) = %v, want %q", i, tc.wire, cerr, tc.want)
		}
	}
}

// BenchmarkNamespaces measures a start of /bin/true in the namespaces of
// testRoot, as the host sees it.
func BenchmarkNamespaces(b *testing.B) {
	requireNamespaces(b)
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "secret"), nil, 0o644)
	for _, im := range impls() {
		b.Run(im.name, func(b *testing.B) {
			for b.Loop() {
				cmd, h, err := command(Spec{Path: "/bin/true", Args: []string{"true"}, Namespaces: testRoot(dir)}, "", nil, "", nil, im.marker)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.Start(context.Background(), cmd); err != nil {
					b.Fatal(err)
				}
				cmd.Wait()
				if _, err := h.Status(); err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
		})
	}
}

// innerMarker is argv[0] of the supervisor inside the namespaces (pid 1): a clone
// of the C one, or the Go one started again.
func innerMarker(im impl) string {
	if im.c {
		return im.marker
	}
	return markerGoNS
}
