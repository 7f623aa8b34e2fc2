package supervise

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// impl is one of the two supervisors.
type impl struct {
	name   string
	marker string
	c      bool
}

// impls returns the supervisors of this build: the C one (the default with cgo)
// and the Go one (the only one without cgo; forced with markerGo otherwise).
func impls() []impl {
	if cSupervisor {
		return []impl{{"c", marker, true}, {"go", markerGo, false}}
	}
	return []impl{{"go", marker, false}}
}

func forEachImpl(t *testing.T, f func(t *testing.T, im impl)) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) { f(t, im) })
	}
}

// TestMain lets the test binary play a host for TestHostDeathKillsTree: with
// PYSB_SUPERVISE_HOST set to a marker, it starts a program under that supervisor,
// prints the supervisor's and the program's pids and waits to be killed.
func TestMain(m *testing.M) {
	if mark := os.Getenv("PYSB_SUPERVISE_HOST"); mark != "" {
		os.Exit(playHost(mark))
	}
	os.Exit(m.Run())
}

func playHost(mark string) int {
	// The program starts a grandchild in a session of its own (out of the
	// program's process group: only the /proc scan finds it), prints its pid and
	// sleeps.
	spec := Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "setsid sleep 1000 & echo $!; exec sleep 1000"}}
	if dir := os.Getenv("PYSB_SUPERVISE_NS"); dir != "" {
		// In namespaces: the pid namespace takes every process with it.
		spec = Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "setsid sleep 1000 & exec sleep 1000"}, Namespaces: testRoot(dir)}
	}
	cmd, h, err := command(spec, "", []string{"PATH=/usr/bin:/bin"}, "", nil, mark)
	if err != nil {
		fmt.Println("command:", err)
		return 1
	}
	cmd.Stdout = os.Stdout
	pid, err := h.Start(context.Background(), cmd)
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	fmt.Println(cmd.Process.Pid, pid)
	time.Sleep(time.Hour)
	return 0
}

// TestCConstants: the C supervisor's constants are the Go side's.
func TestCConstants(t *testing.T) {
	if !cSupervisor {
		t.Skip("no C supervisor without cgo")
	}
	want := map[string]any{
		"marker": marker, "version": version, "hostDied": int(SignalHostDied), "terminate": int(SignalTerminate),
		"maxSpec": maxSpec, "maxStages": maxStages, "maxRlimits": maxRlimits, "maxExtra": maxExtra, "maxBPFInsns": maxBPFInsns,
		"maxRecords": maxRecords, "maxRootOps": maxRootOps, "maxViewOps": maxViewOps,
	}
	if got := cConstants(); !reflect.DeepEqual(got, want) {
		t.Errorf("C constants %v, want %v", got, want)
	}
}

// TestCSupervisorIsUsed: in a cgo build the supervisor of a default Command is
// the C one: one thread, and no Go runtime (the Go one has several threads). The
// supervisor's own environment is empty, whatever the program's.
func TestCSupervisorIsUsed(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		script := `grep '^Threads:' /proc/$PPID/status; tr '\0' ' ' < /proc/$PPID/cmdline; echo; echo "environ=$(wc -c < /proc/$PPID/environ)"`
		out, ws, err := runSupervisedWith(t, im, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}})
		if err != nil || ws.ExitStatus() != 0 {
			t.Fatalf("run: %v, %v: %s", err, ws, out)
		}
		m := regexp.MustCompile(`Threads:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no thread count in %q", out)
		}
		threads, _ := strconv.Atoi(m[1])
		if im.c != (threads == 1) {
			t.Errorf("%s supervisor has %d threads", im.name, threads)
		}
		if !strings.Contains(out, im.marker+" "+version+" 3 4") {
			t.Errorf("supervisor command line not in %q", out)
		}
		if !strings.Contains(out, "environ=0") {
			t.Errorf("the supervisor has an environment: %q", out)
		}
	})
	// Command runs the first of impls (the C one in a cgo build).
	cmd, h, err := Command(Spec{Path: "/bin/true"}, "", nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if cmd.Args[0] != impls()[0].marker || impls()[0].c != cSupervisor {
		t.Errorf("Command runs %q", cmd.Args[0])
	}
}

// TestEnvironmentAndArgs: the program gets exactly its argv and environment
// (duplicates removed, the last winning; tabs, newlines and backslashes intact).
func TestEnvironmentAndArgs(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		args := []string{"printer", "a\tb", "c\nd", `e\f`, "", "\\t"}
		env := []string{"A=1", "B=x\ty\nz\\", "A=2", "LD_PRELOAD=/nonexistent/lib.so", "EMPTY=", "PYTHONCOERCECLOCALE=0"}
		spec := Spec{Path: "/usr/bin/python3", Args: append([]string{"/usr/bin/python3", "-c",
			`import os, sys, json; print(json.dumps([sys.argv[1:], sorted(os.environ.items())]))`}, args...)}
		cmd, h, err := command(spec, "", env, "", nil, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if _, err := h.Start(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if _, err := h.Status(); err != nil {
			t.Fatal(err)
		}
		var got [2]json.RawMessage
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %q (stderr %q)", err, out.String(), stderr.String())
		}
		var gotArgs []string
		var gotEnv [][2]string
		json.Unmarshal(got[0], &gotArgs)
		json.Unmarshal(got[1], &gotEnv)
		// The argument "-c" and the script are python's.
		if !reflect.DeepEqual(gotArgs, args) {
			t.Errorf("args %q, want %q", gotArgs, args)
		}
		wantEnv := [][2]string{{"A", "2"}, {"B", "x\ty\nz\\"}, {"EMPTY", ""}, {"LD_PRELOAD", "/nonexistent/lib.so"}, {"PYTHONCOERCECLOCALE", "0"}}
		if !reflect.DeepEqual(gotEnv, wantEnv) {
			t.Errorf("env %q, want %q", gotEnv, wantEnv)
		}
		// ld.so complains about the preload for the program only, not for the
		// supervisor (which never saw it).
		if n := strings.Count(stderr.String(), "/nonexistent/lib.so"); n != 1 {
			t.Errorf("LD_PRELOAD seen %d times: %q", n, stderr.String())
		}
	})
}

// TestDescriptors: the program gets exactly 0, 1, 2 and the extra files; neither
// the status pipe, nor the spec file, nor a descriptor the host leaked without
// close-on-exec.
func TestDescriptors(t *testing.T) {
	leak, err := unix.Open("/dev/null", unix.O_RDONLY, 0) // no O_CLOEXEC: the supervisor inherits it
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leak)
	forEachImpl(t, func(t *testing.T, im impl) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		spec := Spec{Path: "/bin/sh", Args: []string{"sh", "-c", `ls /proc/self/fd | sort -n | tr '\n' ' '; echo hi >&3`}}
		cmd, h, err := command(spec, "", nil, "", []*os.File{w}, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		var out bytes.Buffer
		cmd.Stdout = &out
		if _, err := h.Start(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
		w.Close()
		cmd.Wait()
		if _, err := h.Status(); err != nil {
			t.Fatal(err)
		}
		// ls itself opens one more: its directory.
		if got := strings.TrimSpace(out.String()); got != "0 1 2 3 4" {
			t.Errorf("descriptors %q, want 0 1 2 3 (and ls's 4)", got)
		}
		line, _ := bufio.NewReader(r).ReadString('\n')
		if line != "hi\n" {
			t.Errorf("extra file: %q", line)
		}
	})
}

// TestStartErrors: a program that does not exist, cannot be executed, or is not
// a program, fails with the errno of execve (like os/exec); both supervisors say
// the same.
func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("\x7fELF garbage"), 0o755)
	for _, tc := range []struct {
		path  string
		errno syscall.Errno
	}{
		{filepath.Join(dir, "missing"), syscall.ENOENT},
		{noexec, syscall.EACCES},
		{dir, syscall.EACCES},
		{garbage, syscall.ENOEXEC},
	} {
		t.Run(tc.errno.Error()+" "+filepath.Base(tc.path), func(t *testing.T) {
			msgs := map[string]string{}
			forEachImpl(t, func(t *testing.T, im impl) {
				_, _, err := runSupervisedWith(t, im, Spec{Path: tc.path, Args: []string{tc.path}})
				var se *StartError
				if !errors.As(err, &se) || se.Errno != tc.errno || se.Path != tc.path {
					t.Fatalf("%s: %#v, want a StartError with %v", tc.path, err, tc.errno)
				}
				if tc.errno == syscall.ENOENT && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("not ErrNotExist: %v", err)
				}
				msgs[im.name] = se.Msg
			})
			if len(msgs) == 2 && msgs["c"] != msgs["go"] {
				t.Errorf("%s: the supervisors differ: C %q, Go %q", tc.path, msgs["c"], msgs["go"])
			}
		})
	}
}

// TestStageErrorsHaveNoErrno: a stage that cannot be applied is a StartError
// without errno (never ErrNotExist, even when a granted path vanished), with the
// same message from both supervisors, and the program never runs.
func TestStageErrorsHaveNoErrno(t *testing.T) {
	requireABI(t, 1)
	abi, _ := LandlockABI()
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	os.MkdirAll(filepath.Join(a, "sub"), 0o755)
	os.WriteFile(filepath.Join(a, "f"), []byte("x"), 0o644)
	os.Symlink(a, filepath.Join(dir, "link"))
	gone := filepath.Join(dir, "gone")
	ran := filepath.Join(dir, "ran")
	bad := denyMkdir()
	bad[8+2] = 200
	ll := func(cfg LandlockConfig) Stage {
		return Stage{Kind: StageLandlock, Landlock: &cfg}
	}
	cases := map[string]struct {
		stage Stage
		want  string
	}{
		"vanished":    {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Paths: []string{gone}}}}), "cannot apply landlock: open " + gone + ": no such file or directory"},
		"base":        {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Base: gone, Paths: []string{"x"}}}}), "open " + gone + ": no such file or directory"},
		"symlink":     {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Paths: []string{dir + "/link/f"}}}}), "symbolic link"},
		"relative":    {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Paths: []string{"etc"}}}}), "path etc is not absolute"},
		"rel base":    {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Base: "etc", Paths: []string{"x"}}}}), "base etc is not absolute"},
		"abs in base": {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Base: a, Paths: []string{"/etc"}}}}), "path /etc is not relative to its base " + a},
		"escape":      {ll(LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Base: a, Paths: []string{"../b"}}}}), "open " + a + "/../b: the path leaves its base directory"},
		"abi":         {ll(LandlockConfig{ABI: abi + 1, FS: llRead}), fmt.Sprintf("the kernel offers Landlock ABI %d, the ruleset needs ABI %d", abi, abi+1)},
		"no abi":      {ll(LandlockConfig{FS: llRead}), "no Landlock ABI"},
		"bad rights":  {ll(LandlockConfig{ABI: 1, FS: 1 << 40}), "landlock_create_ruleset(fs=0x10000000000 net=0x0 scoped=0x0): invalid argument"},
		"ports":       {ll(LandlockConfig{ABI: 1, FS: llRead, Ports: []LandlockPorts{{Access: 1, Lo: 2, Hi: 1}}}), "bad port range 2-1"},
		"seccomp":     {seccompStage(t, bad), "cannot apply seccomp: seccomp stage: seccomp(SECCOMP_SET_MODE_FILTER): invalid argument"},
		"unknown":     {Stage{Kind: "x\ty"}, "cannot apply x\ty: unknown stage \"x\ty\" (host and helper binaries differ?)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msgs := map[string]string{}
			forEachImpl(t, func(t *testing.T, im impl) {
				_, _, err := runSupervisedWith(t, im, Spec{Path: "/usr/bin/touch", Args: []string{"touch", ran},
					Stages: []Stage{{Kind: StageNoNewPrivs}, tc.stage}})
				var se *StartError
				if !errors.As(err, &se) || se.Errno != 0 || errors.Is(err, fs.ErrNotExist) || !strings.Contains(se.Msg, tc.want) {
					t.Fatalf("%#v, want a StartError without errno containing %q", err, tc.want)
				}
				msgs[im.name] = se.Msg
				if _, err := os.Stat(ran); err == nil {
					t.Fatal("the program ran")
				}
			})
			if len(msgs) == 2 && msgs["c"] != msgs["go"] {
				t.Errorf("the supervisors differ:\nC  %q\nGo %q", msgs["c"], msgs["go"])
			}
		})
	}
}

// TestLandlockConfinesProgram: a ruleset through each supervisor confines the
// program (read granted, write and the rest refused), and optional paths that
// vanished are skipped.
func TestLandlockConfinesProgram(t *testing.T) {
	requireABI(t, 1)
	forEachImpl(t, func(t *testing.T, im impl) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "f"), []byte("secret"), 0o644)
		cfg := LandlockConfig{ABI: 1, FS: 1<<13 - 1, Paths: []LandlockPaths{
			{Access: unix.LANDLOCK_ACCESS_FS_EXECUTE | llRead, Paths: []string{"/usr", "/etc"}, Optional: []string{dir + "/gone"}},
			{Access: llRead | llWrite, Base: dir, Paths: []string{"f"}},
			{Access: llRead, Base: dir + "/gone", Optional: []string{"x"}},
		}}
		script := `cat ` + dir + `/f; echo; echo x >> ` + dir + `/f && echo appended; ls ` + dir + ` || echo "ls refused"; cat /proc/self/status || echo "proc refused"`
		out, ws, err := runSupervisedWith(t, im, Spec{Path: "/usr/bin/sh", Args: []string{"sh", "-c", script},
			Stages: []Stage{{Kind: StageNoNewPrivs}, {Kind: StageLandlock, Landlock: &cfg}}})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		for _, want := range []string{"secret\n", "appended", "ls refused", "proc refused"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q: %v\n%s", want, ws, out)
			}
		}
	})
}

// TestLimits: the limits reach the program. With a ruleset to apply, a tiny
// RLIMIT_NOFILE does not keep the supervisor from opening the ruleset's paths, and
// a hard limit above the current one is raised even though the program drops its
// capabilities.
func TestLimits(t *testing.T) {
	requireABI(t, 1)
	var cur unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &cur)
	cfg := (LandlockConfig{ABI: 1, FS: llRead | unix.LANDLOCK_ACCESS_FS_EXECUTE,
		Paths: []LandlockPaths{{Access: llRead | unix.LANDLOCK_ACCESS_FS_EXECUTE, Paths: []string{"/"}}}})
	stages := []Stage{{Kind: StageNoNewPrivs}, {Kind: StageDropCapabilities}, {Kind: StageLandlock, Landlock: &cfg}}
	forEachImpl(t, func(t *testing.T, im impl) {
		out, _, err := runSupervisedWith(t, im, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "ulimit -n; ulimit -Hn; ulimit -f"},
			Rlimits: []Rlimit{{Resource: unix.RLIMIT_NOFILE, Value: 4}, {Resource: unix.RLIMIT_FSIZE, Value: 10 << 10}},
			Stages:  stages})
		if err != nil || strings.Fields(out)[0] != "4" || strings.Fields(out)[1] != "4" || strings.Fields(out)[2] != "20" {
			t.Errorf("small NOFILE: %v: %q, want 4 4 20", err, out)
		}
		if !hasCap(unix.CAP_SYS_RESOURCE) || cur.Max >= 1<<20 {
			t.Log("cannot raise a hard limit here: not tested")
			return
		}
		out, _, err = runSupervisedWith(t, im, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "ulimit -n; ulimit -Hn; grep CapEff /proc/self/status"},
			Rlimits: []Rlimit{{Resource: unix.RLIMIT_NOFILE, Value: 100, Hard: cur.Max + 1}}, Stages: stages})
		if want := fmt.Sprintf("100 %d CapEff: 0000000000000000", cur.Max+1); err != nil || strings.Join(strings.Fields(out), " ") != want {
			t.Errorf("raised hard limit: %v: %q, want %q", err, out, want)
		}
	})
	// A limit the kernel refuses keeps its errno (like a program that cannot run).
	msgs := map[string]string{}
	forEachImpl(t, func(t *testing.T, im impl) {
		_, _, err := runSupervisedWith(t, im, Spec{Path: "/bin/true", Args: []string{"true"},
			Rlimits: []Rlimit{{Resource: 99, Value: 1}}})
		var se *StartError
		if !errors.As(err, &se) || se.Errno != syscall.EINVAL || !strings.Contains(se.Msg, "cannot set resource limit 99 to 1") {
			t.Fatalf("%#v, want EINVAL", err)
		}
		msgs[im.name] = se.Msg
	})
	if len(msgs) == 2 && msgs["c"] != msgs["go"] {
		t.Errorf("the supervisors differ: C %q, Go %q", msgs["c"], msgs["go"])
	}
}

// TestSignalsAndTerminate: the ordinary signals reach the program; Terminate
// kills the whole tree, including a descendant in a session of its own; the
// status is the program's.
func TestSignalsAndTerminate(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		// Forwarded: the program exits 3 on SIGTERM (sh runs the trap between its
		// foreground commands: sleep in the background and wait).
		spec := Spec{Path: "/bin/sh", Args: []string{"sh", "-c", `trap 'exit 3' TERM; echo ready; sleep 100 & wait`}}
		cmd, h, err := command(spec, "", nil, "", nil, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		out, _ := cmd.StdoutPipe()
		if _, err := h.Start(t.Context(), cmd); err != nil {
			t.Fatal(err)
		}
		bufio.NewReader(out).ReadString('\n')
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		ws, err := h.Status()
		if err != nil || !ws.Exited() || ws.ExitStatus() != 3 {
			t.Errorf("after SIGTERM: %v, %v; want exit 3", ws, err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 3 {
			t.Errorf("supervisor exit code %d, want 3", code)
		}

		// Terminate: the tree dies, the status is SIGKILL.
		spec = Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "setsid sleep 1000 & echo $!; sleep 1000"}}
		cmd, h, err = command(spec, "", nil, "", nil, im.marker)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		out, _ = cmd.StdoutPipe()
		pid, err := h.Start(t.Context(), cmd)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		orphan, _ := strconv.Atoi(strings.TrimSpace(line))
		Terminate(cmd.Process)
		cmd.Wait()
		ws, err = h.Status()
		if err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("after Terminate: %v, %v; want killed", ws, err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 128+9 {
			t.Errorf("supervisor exit code %d, want 137", code)
		}
		for _, p := range []int{pid, orphan} {
			if p <= 0 || syscall.Kill(p, 0) == nil {
				t.Errorf("process %d survived", p)
			}
		}
	})
}

// TestHostDeathKillsTree: when the host dies, the supervisor kills the whole tree
// (program and a descendant in a session of its own) and exits.
func TestHostDeathKillsTree(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		host := exec.Command(os.Args[0], "-test.run=^$")
		host.Env = append(os.Environ(), "PYSB_SUPERVISE_HOST="+im.marker)
		out, _ := host.StdoutPipe()
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		// Two lines, in either order: the grandchild's pid (from the program), and
		// the supervisor's and the program's (from the host).
		br := bufio.NewReader(out)
		var sup, prog, orphan int
		var said []string
		for range 2 {
			line, _ := br.ReadString('\n')
			said = append(said, line)
			if f := strings.Fields(line); len(f) == 2 {
				sup, _ = strconv.Atoi(f[0])
				prog, _ = strconv.Atoi(f[1])
			} else if len(f) == 1 {
				orphan, _ = strconv.Atoi(f[0])
			}
		}
		if sup <= 0 || prog <= 0 || orphan <= 0 {
			host.Process.Kill()
			host.Wait()
			t.Fatalf("host said %q", said)
		}
		host.Process.Kill()
		host.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for _, p := range []int{sup, prog, orphan} {
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

// hasCap reports whether the test process has the effective capability c.
func hasCap(c int) bool {
	b, _ := os.ReadFile("/proc/self/status")
	m := regexp.MustCompile(`CapEff:\s*([0-9a-f]+)`).FindSubmatch(b)
	if m == nil {
		return false
	}
	v, _ := strconv.ParseUint(string(m[1]), 16, 64)
	return v&(1<<c) != 0
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// TestDispositionsReset: a signal ignored by whoever started the supervisor is
// not ignored by the program.
func TestDispositionsReset(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	self, _ := os.Executable()
	forEachImpl(t, func(t *testing.T, im impl) {
		wire, err := encodeWire(&Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "grep SigIgn /proc/self/status"}, HostPID: os.Getpid()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// bash ignores USR1 and TERM, then becomes the supervisor (same pid, so its
		// parent is this test).
		cmd := exec.Command(bash, "-c", `trap '' USR1 TERM INT PIPE; exec -a "$0" "$@"`, im.marker, self, version, "3", "4")
		reports, stdout, _, _ := runRaw(t, cmd, wire)
		if !strings.HasPrefix(reports, "S ") || !strings.Contains(stdout, "SigIgn:\t0000000000000000") {
			t.Errorf("reports %q, program %q", reports, stdout)
		}
	})
}

// runRaw runs cmd (a supervisor) with the status pipe as descriptor 3 and the
// spec file (wire, unless nil) as 4, and returns the reports, its stdout and
// stderr and its exit code.
func runRaw(t *testing.T, cmd *exec.Cmd, wire []byte) (string, string, string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	if wire != nil {
		sf, err := specFile(wire)
		if err != nil {
			t.Fatal(err)
		}
		defer sf.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, sf)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var reports bytes.Buffer
	reports.ReadFrom(r)
	cmd.Wait()
	return reports.String(), stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// rawSupervisor returns a command that runs the supervisor im of this test binary
// with args after argv[0].
func rawSupervisor(im impl, args ...string) *exec.Cmd {
	return &exec.Cmd{Path: SelfHelper, Args: append([]string{im.marker}, args...)}
}

// TestBadInvocations: a version mismatch, missing arguments and a missing status
// descriptor are told on stderr (there is no status pipe to tell them on), and
// nothing runs.
func TestBadInvocations(t *testing.T) {
	good, err := encodeWire(&Spec{Path: "/bin/true", Args: []string{"true"}, HostPID: os.Getpid()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"v1", "{}"}, `pysandboxes supervisor: protocol "v1", want "` + version + `" (host and helper binaries differ)`},
			{[]string{version, "3"}, "pysandboxes supervisor: bad arguments"},
			{[]string{version, "3", "x"}, "pysandboxes supervisor: bad arguments"},
			{[]string{version, "3", "4", "5"}, "pysandboxes supervisor: bad arguments"},
			{[]string{version, "9", "4"}, "pysandboxes supervisor: no status descriptor"},
		} {
			reports, _, stderr, code := runRaw(t, rawSupervisor(im, tc.args...), good)
			if reports != "" || strings.TrimSpace(stderr) != tc.want || code != 127 {
				t.Errorf("%q: reports %q, stderr %q, exit %d; want %q and 127", tc.args, reports, stderr, code, tc.want)
			}
		}
		// The host is gone (the supervisor's parent is not the host of the spec).
		gone, _ := encodeWire(&Spec{Path: "/bin/true", Args: []string{"true"}, HostPID: 1}, nil)
		reports, _, _, code := runRaw(t, rawSupervisor(im, version, "3", "4"), gone)
		if reports != "E 0 the host process is gone\n" || code != 127 {
			t.Errorf("host gone: %q, exit %d", reports, code)
		}
		// No spec file.
		reports, _, _, code = runRaw(t, rawSupervisor(im, version, "3", "4"), nil)
		// (The Go supervisor's runtime may have taken descriptor 4 for itself: a
		// cgroup file it keeps open.)
		if !strings.HasPrefix(reports, "E 0 bad spec: ") || (im.c && reports != "E 0 bad spec: cannot read it: bad file descriptor\n") || code != 127 {
			t.Errorf("no spec file: %q, exit %d", reports, code)
		}
		// And a good one runs.
		reports, _, _, code = runRaw(t, rawSupervisor(im, version, "3", "4"), good)
		if !regexp.MustCompile(`^S \d+\nX 0\n$`).MatchString(reports) || code != 0 {
			t.Errorf("good spec: %q, exit %d", reports, code)
		}
	})
}

// badSpecs are wire texts that both supervisors refuse, with the reason.
func badSpecs() []struct{ wire, want string } {
	h := fmt.Sprintf("H\t%d\t0\n", os.Getpid())
	p := h + "P\t/bin/true\nA\ttrue\n"
	bpf := func(n int) string { return strings.Repeat("00", n) }
	manyStages := strings.Repeat("S\tno-new-privs\n", maxStages+1)
	manyLimits := strings.Repeat("R\t7\t100\t0\n", maxRlimits+1)
	return []struct{ wire, want string }{
		{"", "the spec does not end with a newline"},
		{h + "P\t/bin/true", "the spec does not end with a newline"},
		{"\n", "line 1: unknown record"},
		{"X\t1\n.\n", "line 1: unknown record"},
		{"H1\t0\n.\n", "line 1: unknown record"},
		{"H\t1\n.\n", "line 1: too few fields"},
		{"H\t1\t0\t2\n.\n", "line 1: too many fields"},
		{"H\t1\t\n.\n", "line 1: field 2: not a number"},
		{"H\t1\t-1\n.\n", "line 1: field 2: not a number"},
		{"H\t18446744073709551616\t0\n.\n", "line 1: field 1: not a number"},
		{"H\t0x10\t0\n.\n", "line 1: field 1: not a number"},
		{h + "P\t/bin/\\x\n.\n", "line 2: field 1: bad escape"},
		{h + "P\t/bin/\\\n.\n", "line 2: field 1: bad escape"},
		{h + "P\t/bin\x00/true\n.\n", "line 2: field 1: NUL byte"},
		{p + "S\tseccomp\nB\t0g\n.\n", "line 5: field 1: bad hex"},
		{p + "S\tseccomp\nB\t000\n.\n", "line 5: field 1: bad hex"},
		{".\n", "line 1: expected the header record H"},
		{"P\t/bin/true\n.\n", "line 1: expected the header record H"},
		{"H\t0\t0\n.\n", "line 1: number out of range"},
		{"H\t2147483648\t0\n.\n", "line 1: number out of range"},
		{"H\t1\t65537\n.\n", "line 1: number out of range"},
		{h + "A\ttrue\n.\n", "line 2: expected the program record P"},
		{h + ".\n", "line 2: expected the program record P"},
		{p + ".\nA\tx\n", "line 5: records after the end"},
		{p, "line 4: unexpected record"},
		{p + "V\tA=1\nA\tx\n.\n", "line 5: unexpected record"},
		{p + "R\t2147483648\t1\t0\n.\n", "line 4: number out of range"},
		{p + manyLimits + ".\n", fmt.Sprintf("line %d: more than %d resource limits", 4+maxRlimits, maxRlimits)},
		{p + manyStages + ".\n", fmt.Sprintf("line %d: more than %d stages", 4+maxStages, maxStages)},
		{p + "S\tlandlock\n.\n", "line 5: expected the landlock record L"},
		{p + "S\tlandlock\nL\t2147483648\t1\t0\t0\n.\n", "line 5: number out of range"},
		{p + "S\tlandlock\nL\t1\t1\t0\t0\np\t/x\n.\n", "line 6: unexpected record"},
		{p + "S\tlandlock\nL\t1\t1\t0\t0\nG\t1\t\no\t/x\np\t/y\n.\n", "line 8: unexpected record"},
		{p + "S\tlandlock\nL\t1\t1\t0\t0\nN\t1\t1\t2\nG\t1\t\n.\n", "line 7: unexpected record"},
		{p + "S\tlandlock\nL\t1\t1\t0\t0\nN\t1\t1\t65536\n.\n", "line 6: number out of range"},
		{p + "S\tseccomp\n.\n", "line 5: expected the seccomp record B"},
		{p + "S\tseccomp\nB\t\n.\n", "line 5: empty filter program"},
		{p + "S\tseccomp\nB\t" + bpf(12) + "\n.\n", "line 5: filter program of 12 bytes is not a whole number of 8-byte instructions"},
		{p + "S\tseccomp\nB\t" + bpf(8*4097) + "\n.\n", "line 5: filter program of 4097 instructions is longer than the kernel's limit of 4096"},
		{p + "S\tno-new-privs\nL\t1\t1\t0\t0\n.\n", "line 5: unexpected record"},
		{p + "S\tseccomp\nB\t" + bpf(8) + "\nB\t" + bpf(8) + "\n.\n", "line 6: unexpected record"},
	}
}

// TestBadSpecs: both supervisors (and decodeWire) refuse every malformed spec with
// the same message, reported on the status pipe, and run nothing.
func TestBadSpecs(t *testing.T) {
	for i, tc := range badSpecs() {
		_, err := decodeWire([]byte(tc.wire))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%d: decodeWire(%q) = %v, want %q", i, tc.wire, err, tc.want)
		}
		if ok, cerr := cParse([]byte(tc.wire)); ok && (cerr == nil || cerr.Error() != tc.want) {
			t.Errorf("%d: C parse(%q) = %v, want %q", i, tc.wire, cerr, tc.want)
		}
	}
	forEachImpl(t, func(t *testing.T, im impl) {
		for i, tc := range badSpecs() {
			reports, stdout, stderr, code := runRaw(t, rawSupervisor(im, version, "3", "4"), []byte(tc.wire))
			if want := "E 0 bad spec: " + tc.want + "\n"; reports != want || code != 127 || stdout != "" || stderr != "" {
				t.Errorf("%d (%.40q): reports %q, exit %d, stderr %q; want %q", i, tc.wire, reports, code, stderr, want)
			}
		}
		// Too many records.
		many := []byte(strings.Repeat("A\tx\n", maxRecords+1))
		reports, _, _, code := runRaw(t, rawSupervisor(im, version, "3", "4"), many)
		if want := fmt.Sprintf("E 0 bad spec: more than %d records\n", maxRecords); reports != want || code != 127 {
			t.Errorf("too many records: %q, exit %d; want %q", reports, code, want)
		}
		// Too large.
		big := make([]byte, maxSpec+1)
		reports, _, _, code = runRaw(t, rawSupervisor(im, version, "3", "4"), big)
		if want := fmt.Sprintf("E 0 bad spec: %d bytes, more than %d\n", maxSpec+1, maxSpec); reports != want || code != 127 {
			t.Errorf("too large: %q, exit %d; want %q", reports, code, want)
		}
	})
}

// FuzzWireParity: the C parser and decodeWire accept the same specs and refuse
// the others with the same message.
func FuzzWireParity(f *testing.F) {
	if ok, _ := cParse(nil); !ok {
		f.Skip("no C supervisor without cgo")
	}
	for _, tc := range badSpecs() {
		if len(tc.wire) < 4096 {
			f.Add([]byte(tc.wire))
		}
	}
	ll := (LandlockConfig{ABI: 4, FS: 7, Net: 3, Paths: []LandlockPaths{{Access: 5, Base: "/a", Paths: []string{"b\tc"}, Optional: []string{"d"}}},
		Ports: []LandlockPorts{{Access: 2, Lo: 80, Hi: 81}}})
	good, err := encodeWire(&Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo \\n"}, HostPID: 7, ExtraFiles: 1,
		Rlimits: []Rlimit{{Resource: 7, Value: 64}},
		Stages:  []Stage{{Kind: StageNoNewPrivs}, {Kind: StageLandlock, Landlock: &ll}, {Kind: StageSeccomp, BPF: denyMkdir()}}}, []string{"A=b"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, gerr := decodeWire(b)
		_, cerr := cParse(b)
		if (gerr == nil) != (cerr == nil) || (gerr != nil && gerr.Error() != cerr.Error()) {
			t.Errorf("%q: Go %v, C %v", b, gerr, cerr)
		}
	})
}

// TestWireRoundTrip: what Command encodes decodes to the same spec.
func TestWireRoundTrip(t *testing.T) {
	ll := LandlockConfig{ABI: 7, FS: 0xffff, Net: 3, Scoped: 3,
		Paths: []LandlockPaths{{Access: 5, Base: "/a\tb", Paths: []string{"x\ny", `z\`}, Optional: []string{"o"}}, {Access: 1, Optional: []string{"/q"}}},
		Ports: []LandlockPorts{{Access: 2, Lo: 1, Hi: 65535}}}
	spec := Spec{Path: "/bin/\\sh", Args: []string{"sh", "", "\t"}, ExtraFiles: 2, HostPID: 42,
		Rlimits: []Rlimit{{Resource: 7, Value: 10}, {Resource: 0, Value: 1, Hard: 2}},
		Stages: []Stage{{Kind: StageNoNewPrivs}, {Kind: StageDropCapabilities}, {Kind: StageLandlock, Landlock: &ll},
			seccompStage(t, denyMkdir()), {Kind: "other", BPF: []byte("ignored")}}}
	env := []string{"A=1", "B=\n"}
	b, err := encodeWire(&spec, env)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeWire(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want := &wireSpec{hostPID: 42, extra: 2, path: spec.Path, args: spec.Args, env: env, rlimits: spec.Rlimits,
		stages: []Stage{{Kind: StageNoNewPrivs}, {Kind: StageDropCapabilities}, {Kind: StageLandlock, Landlock: &ll},
			{Kind: StageSeccomp, BPF: denyMkdir()}, {Kind: "other"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

// TestCommandRefuses: what no supervisor could take fails in Command, before
// anything starts: a NUL byte, a stage configuration that does not decode (a
// StartError), too many stages or limits.
func TestCommandRefuses(t *testing.T) {
	bad := []struct {
		spec Spec
		env  []string
		want string
	}{
		{Spec{Path: "/bin/tr\x00ue"}, nil, "NUL"},
		{Spec{Path: "/bin/true", Args: []string{"a\x00"}}, nil, "NUL"},
		{Spec{Path: "/bin/true"}, []string{"A=\x00"}, "NUL"},
		{Spec{Path: "/bin/true", Stages: []Stage{{Kind: StageLandlock, Landlock: &LandlockConfig{ABI: 1, Paths: []LandlockPaths{{Access: 1, Paths: []string{"/x\x00"}}}}}}}, nil, "NUL"},
		{Spec{Path: "/bin/true", Stages: []Stage{{Kind: StageLandlock}}}, nil, "cannot apply landlock: bad configuration: no ruleset"},
		{Spec{Path: "/bin/true", Stages: []Stage{{Kind: StageSetIdentity}}}, nil, "cannot apply set-identity: bad configuration: no identity"},
		{Spec{Path: "/bin/true", Stages: []Stage{{Kind: StageSetIdentity, Identity: &Identity{UID: math.MaxUint32}}}}, nil, "cannot apply set-identity: bad identity"},
		{Spec{Path: "/bin/true", Stages: []Stage{{Kind: StageSeccomp}}}, nil, "cannot apply seccomp: seccomp stage: empty filter program"},
		{Spec{Path: "/bin/true", Stages: make([]Stage, maxStages+1)}, nil, "stages"},
		{Spec{Path: "/bin/true", Rlimits: make([]Rlimit, maxRlimits+1)}, nil, "resource limits"},
		{Spec{Path: "/bin/true", Rlimits: []Rlimit{{Resource: -1}}}, nil, "bad resource limit"},
	}
	for _, tc := range bad {
		_, _, err := Command(tc.spec, "", tc.env, "", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Command(%+v) = %v, want an error with %q", tc.spec, err, tc.want)
		}
		if strings.HasPrefix(tc.want, "cannot apply") {
			var se *StartError
			if !errors.As(err, &se) || se.Errno != 0 {
				t.Errorf("not a StartError without errno: %#v", err)
			}
		}
	}
}

// BenchmarkSupervised measures a start of /bin/true under each supervisor, and
// a bare exec of it, as the host sees them.
func BenchmarkSupervised(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, im := range impls() {
		b.Run(im.name, func(b *testing.B) {
			for b.Loop() {
				cmd, h, err := command(Spec{Path: "/bin/true", Args: []string{"true"}}, "", nil, "", nil, im.marker)
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
			}
		})
	}
}
