package supervise

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Classic BPF opcodes and seccomp return values, for hand-written test filters.
const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	retAllow   = 0x7fff0000
	retErrno   = 0x00050000
	offsetOfNr = 0 // seccomp_data.nr
)

// denyMkdir returns a filter that fails mkdir and mkdirat with EPERM and allows
// everything else (a test filter: it does not check the architecture).
func denyMkdir() []byte {
	nrs := []uint32{unix.SYS_MKDIRAT}
	if runtime.GOARCH == "amd64" {
		nrs = append(nrs, 83) // mkdir, which only the older architectures have
	}
	prog := []unix.SockFilter{{Code: bpfLdWAbs, K: offsetOfNr}}
	for i, nr := range nrs {
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, Jt: uint8(len(nrs) - i), Jf: 0, K: nr})
	}
	prog = append(prog,
		unix.SockFilter{Code: bpfRetK, K: retAllow},
		unix.SockFilter{Code: bpfRetK, K: retErrno | uint32(unix.EPERM)})
	var b []byte
	for _, in := range prog {
		b = binary.NativeEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b
}

func seccompStage(t testing.TB, bpf []byte) Stage {
	t.Helper()
	return Stage{Kind: StageSeccomp, BPF: bpf}
}

// onThrowawayThread runs f on an OS thread of its own that is never given back:
// whatever f applies to its thread (no_new_privs, a filter) dies with it. After f
// returns, check runs on that thread too, with the thread still alive.
func onThrowawayThread(f func() error, check func(tid int)) error {
	done := make(chan error)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		err := f()
		if err == nil && check != nil {
			check(unix.Gettid())
		}
		done <- err
		<-release
	}()
	err := <-done
	close(release)
	return err
}

func TestDecodeBPF(t *testing.T) {
	good := denyMkdir()
	prog, err := decodeBPF(good)
	if err != nil || len(prog) < 4 || prog[1].K != uint32(unix.SYS_MKDIRAT) || prog[1].Jt != uint8(len(prog)-3) || prog[len(prog)-1].K != retErrno|uint32(unix.EPERM) {
		t.Fatalf("decodeBPF = %+v, %v", prog, err)
	}
	for _, bad := range []struct {
		bpf  []byte
		want string
	}{
		{nil, "empty"},
		{good[:7], "not a whole number"},
		{good[:31], "not a whole number"},
		{make([]byte, 8*4097), "longer than the kernel's limit"},
	} {
		if _, err := decodeBPF(bad.bpf); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("decodeBPF(%d bytes) = %v, want an error with %q", len(bad.bpf), err, bad.want)
		}
	}
	if _, err := decodeBPF(make([]byte, 8*4096)); err != nil {
		t.Errorf("4096 instructions: %v", err)
	}
}

func TestApplySeccompRefusesBadConfig(t *testing.T) {
	for _, bpf := range [][]byte{nil, {}, make([]byte, 7), make([]byte, 9)} {
		var err error
		// Nothing may be applied before the checks: run on a thread of our own anyway.
		if err2 := onThrowawayThread(func() error { err = applyStage(seccompStage(t, bpf)); return nil }, nil); err2 != nil {
			t.Fatal(err2)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "seccomp stage: ") {
			t.Errorf("applyStage(seccomp, %d bytes) = %v, want an error", len(bpf), err)
		}
	}
}

// TestApplySeccompKernelRefuses: a program the kernel rejects (a jump past the
// end) is an error, not a silently unconfined thread.
func TestApplySeccompKernelRefuses(t *testing.T) {
	b := denyMkdir()
	b[8+2] = 200 // Jt of the first JEQ: far past the end
	err := onThrowawayThread(func() error { return applyStage(seccompStage(t, b)) }, nil)
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("applySeccomp(bad jump) = %v, want EINVAL", err)
	}
}

// statusField reads one field of /proc/self/task/TID/status.
func statusField(t testing.TB, tid int, field string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s*(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in the status of thread %d", field, tid)
	}
	return string(m[1])
}

// TestApplySeccompCallingThreadOnly installs a filter that refuses mkdirat on one
// thread of the test process: that thread is confined (and has no_new_privs), the
// others are not.
func TestApplySeccompCallingThreadOnly(t *testing.T) {
	dir := t.TempDir()
	var confinedErr error
	var seccompMode, nnp string
	var others []string
	err := onThrowawayThread(func() error {
		return applyStage(seccompStage(t, denyMkdir()))
	}, func(tid int) {
		confinedErr = os.Mkdir(filepath.Join(dir, "confined"), 0o755)
		seccompMode = statusField(t, tid, "Seccomp")
		nnp = statusField(t, tid, "NoNewPrivs")
		// Every other thread of the process, while the confined one lives.
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			if task.Name() != strconv.Itoa(tid) {
				b, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
				if m := regexp.MustCompile(`(?m)^Seccomp:\s*(\S+)`).FindSubmatch(b); m != nil {
					others = append(others, string(m[1]))
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("applySeccomp: %v", err)
	}
	if !errors.Is(confinedErr, syscall.EPERM) {
		t.Errorf("mkdir on the confined thread: %v, want EPERM", confinedErr)
	}
	if seccompMode != "2" || nnp != "1" {
		t.Errorf("confined thread: Seccomp %s, NoNewPrivs %s; want 2 and 1", seccompMode, nnp)
	}
	if len(others) == 0 {
		t.Errorf("no other thread seen")
	}
	for _, m := range others {
		if m != "0" {
			t.Errorf("another thread has Seccomp %s: the filter spread beyond the calling thread", m)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "free"), 0o755); err != nil {
		t.Errorf("mkdir on another thread: %v", err)
	}
}

// runSupervisedWith runs spec under the supervisor im and returns the program's
// output and wait status, or the start error (from Command or from the
// supervisor).
func runSupervisedWith(t *testing.T, im impl, spec Spec) (string, syscall.WaitStatus, error) {
	t.Helper()
	cmd, h, err := command(spec, "", []string{"PATH=/usr/bin:/bin"}, "", nil, im.marker)
	if err != nil {
		return "", 0, err
	}
	defer h.Close()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.Start(ctx, cmd); err != nil {
		cmd.Wait()
		return out.String(), 0, err
	}
	cmd.Wait() // the supervisor's own exit code mirrors the program's
	ws, err := h.Status()
	if err != nil {
		t.Fatalf("status: %v (output %q)", err, out.String())
	}
	return out.String(), ws, nil
}

// TestSeccompStageConfinesProgram: the program (and what it starts) runs under the
// filter, with no_new_privs; the supervisor does not (the C one not at all, the Go
// one only on the parked thread that started the program).
func TestSeccompStageConfinesProgram(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		dir := t.TempDir()
		script := `mkdir ` + dir + `/x; echo "mkdir=$?"
/bin/sh -c 'mkdir ` + dir + `/y; echo "child mkdir=$?"'
grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status
for s in /proc/$PPID/task/*/status; do grep '^Seccomp:' $s; done | sort | uniq -c | tr -s ' ' | sed 's/^ //; s/^/supervisor /'`
		out, ws, err := runSupervisedWith(t, im, Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", script},
			Stages: []Stage{seccompStage(t, denyMkdir())}})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		t.Logf("status %v, output:\n%s", ws, out)
		want := []string{"mkdir=1", "child mkdir=1", "Operation not permitted", "Seccomp:\t2", "NoNewPrivs:\t1"}
		if im.c {
			// One thread, free.
			want = append(want, "supervisor 1 Seccomp:\t0")
			if strings.Contains(out, "supervisor 1 Seccomp:\t2") {
				t.Errorf("the C supervisor is confined")
			}
		} else {
			// One confined thread, the one that forked the program; the others are free.
			want = append(want, "supervisor 1 Seccomp:\t2")
			if !regexp.MustCompile(`supervisor \d+ Seccomp:\t0`).MatchString(out) {
				t.Errorf("no unconfined supervisor thread")
			}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q", w)
			}
		}
		for _, name := range []string{"x", "y"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%s was created under the filter", name)
			}
		}
	})
}

// TestSeccompStageFailsClosed: a filter that cannot be installed means the program
// never runs.
func TestSeccompStageFailsClosed(t *testing.T) {
	forEachImpl(t, func(t *testing.T, im impl) {
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		bad := denyMkdir()
		bad[8+2] = 200
		for name, stage := range map[string]Stage{
			"truncated":      seccompStage(t, bad[:13]),
			"empty":          seccompStage(t, nil),
			"kernel refuses": seccompStage(t, bad),
			"no program":     {Kind: StageSeccomp},
		} {
			_, _, err := runSupervisedWith(t, im, Spec{Path: "/usr/bin/touch", Args: []string{"touch", marker}, Stages: []Stage{stage}})
			var se *StartError
			if !errors.As(err, &se) || !strings.Contains(se.Msg, "seccomp") || se.Errno != 0 {
				t.Errorf("%s: start error %#v, want a StartError about seccomp, without errno", name, err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("%s: the program ran", name)
			}
		}
	})
}
