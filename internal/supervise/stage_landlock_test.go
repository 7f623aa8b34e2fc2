package supervise

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	llRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
)

func requireABI(t *testing.T, v int) int {
	t.Helper()
	abi, err := LandlockABI()
	if err != nil {
		t.Skipf("Landlock unavailable: %v", err)
	}
	if abi < v {
		t.Skipf("Landlock ABI %d < %d", abi, v)
	}
	return abi
}

// onRestrictedThread applies cfg to a thread of its own, then runs f there. The
// thread is never given back to the runtime: it ends with the goroutine.
func onRestrictedThread(t *testing.T, cfg LandlockConfig, f func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		if err := noNewPrivs(); err != nil {
			done <- err
			return
		}
		if err := applyStage(Stage{Kind: StageLandlock, Landlock: &cfg}); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	return <-done
}

func readErr(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func writeErr(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func setup(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b, filepath.Join(a, "sub")} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644)
	}
	return a, b
}

// TestLandlockStageGrants: the granted tree is readable, the rest is not, writing
// is refused, and the restriction holds for the thread only.
func TestLandlockStageGrants(t *testing.T) {
	requireABI(t, 1)
	a, b := setup(t)
	cfg := LandlockConfig{ABI: 1, FS: 1<<13 - 1, Paths: []LandlockPaths{
		{Access: llRead, Paths: []string{a}},
		{Access: llRead | llWrite, Base: b, Paths: []string{"f"}}, // a file: directory rights dropped
	}}
	var errs [5]error
	if err := onRestrictedThread(t, cfg, func() {
		errs[0] = readErr(filepath.Join(a, "sub", "f"))
		errs[1] = readErr("/etc/hostname")
		errs[2] = writeErr(filepath.Join(a, "f"))
		errs[3] = writeErr(filepath.Join(b, "f"))
		_, errs[4] = os.ReadDir(b)
	}); err != nil {
		t.Fatal(err)
	}
	want := []error{nil, unix.EACCES, unix.EACCES, nil, unix.EACCES}
	for i := range want {
		if !errors.Is(errs[i], want[i]) && !(want[i] == nil && errs[i] == nil) {
			t.Errorf("access %d: got %v, want %v", i, errs[i], want[i])
		}
	}
	// This goroutine's thread is not restricted.
	if err := readErr("/etc/hostname"); err != nil && !errors.Is(err, unix.ENOENT) {
		t.Errorf("the test thread is restricted: %v", err)
	}
}

// TestLandlockStageFailsClosed: a granted path that vanished, a symbolic link on
// the way, an ABI the kernel lacks, a bad configuration: each is an error, and
// nothing is restricted. An optional path that vanished is skipped.
func TestLandlockStageFailsClosed(t *testing.T) {
	abi := requireABI(t, 1)
	a, _ := setup(t)
	link := filepath.Join(filepath.Dir(a), "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(a, "gone")
	for name, tc := range map[string]struct {
		cfg  LandlockConfig
		want string
	}{
		"vanished":   {LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Paths: []string{gone}}}}, gone},
		"base":       {LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Base: gone, Paths: []string{"x"}}}}, gone},
		"symlink":    {LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Paths: []string{filepath.Join(link, "f")}}}}, "symbolic link"},
		"relative":   {LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Paths: []string{"etc"}}}}, "not absolute"},
		"escape":     {LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{{Access: llRead, Base: a, Paths: []string{"../b"}}}}, "leaves its base"},
		"abi":        {LandlockConfig{ABI: abi + 1, FS: llRead}, "needs ABI"},
		"no abi":     {LandlockConfig{FS: llRead}, "no Landlock ABI"},
		"bad rights": {LandlockConfig{ABI: 1, FS: 1 << 40}, "landlock_create_ruleset"},
		"ports":      {LandlockConfig{ABI: 1, FS: llRead, Ports: []LandlockPorts{{Access: 1, Lo: 2, Hi: 1}}}, "bad port range"},
	} {
		t.Run(name, func(t *testing.T) {
			restricted := false
			err := onRestrictedThread(t, tc.cfg, func() { restricted = true })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if restricted {
				t.Fatal("ran restricted")
			}
		})
	}
	if err := applyStage(Stage{Kind: StageLandlock}); err == nil || !strings.Contains(err.Error(), "no ruleset") {
		t.Errorf("a landlock stage without its ruleset: %v, want an error naming it", err)
	}
	// Optional paths that vanished, even with their base, are skipped.
	ok := LandlockConfig{ABI: 1, FS: llRead, Paths: []LandlockPaths{
		{Access: llRead, Paths: []string{a}, Optional: []string{gone}},
		{Access: llRead, Base: gone, Optional: []string{"x", "y"}},
	}}
	var rerr error
	if err := onRestrictedThread(t, ok, func() { rerr = readErr(filepath.Join(a, "f")) }); err != nil || rerr != nil {
		t.Fatalf("optional paths: %v, read: %v", err, rerr)
	}
}

// TestLandlockStagePorts: TCP connect is allowed to the granted port only.
func TestLandlockStagePorts(t *testing.T) {
	requireABI(t, 4)
	var ports [2]int
	for i := range ports {
		var lc net.ListenConfig
		lc.SetMultipathTCP(false)
		l, err := lc.Listen(t.Context(), "tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	cfg := LandlockConfig{ABI: 4, FS: llRead, Net: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP | unix.LANDLOCK_ACCESS_NET_BIND_TCP,
		Ports: []LandlockPorts{{Access: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, Lo: uint16(ports[0]), Hi: uint16(ports[0])}}}
	var errs [2]error
	if err := onRestrictedThread(t, cfg, func() {
		for i, p := range ports {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				errs[i] = err
				continue
			}
			errs[i] = unix.Connect(fd, &unix.SockaddrInet4{Port: p, Addr: [4]byte{127, 0, 0, 1}})
			unix.Close(fd)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], syscall.EACCES) {
		t.Errorf("allowed port: %v, other port: %v (want nil, EACCES)", errs[0], errs[1])
	}
}
