package hidefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// settle waits for the goroutine count to come back to at most want.
func settle(want int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 200 && n > want; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

func TestServeLifecycle(t *testing.T) {
	host := tree(t, map[string]string{"a.txt": "A", "d/b.txt": "B"})
	use := func(m *mnt) {
		for i := 0; i < 20; i++ {
			if b, err := os.ReadFile(m.p("d/b.txt")); err != nil || string(b) != "B" {
				t.Fatalf("read = %q, %v", b, err)
			}
			names(t, m.p("d"))
		}
	}
	// Warm up what the runtime and the test framework start once.
	m := startMount(t, host, Options{}, mountOpts{})
	use(m)
	m.end()
	time.Sleep(50 * time.Millisecond)
	fds, gs := fdCount(t), runtime.NumGoroutine()

	t.Run("returns when the mount namespace ends", func(t *testing.T) {
		m := startMount(t, host, Options{}, mountOpts{})
		use(m)
		m.end()
		if m.err != nil {
			t.Errorf("Serve = %v, want nil", m.err)
		}
	})
	t.Run("returns on unmount", func(t *testing.T) {
		m := startMount(t, host, Options{}, mountOpts{})
		use(m)
		if got := m.command("umount"); got != "ok" {
			t.Fatalf("umount: %s", got)
		}
		select {
		case err := <-m.done:
			if err != nil {
				t.Errorf("Serve = %v after unmount, want nil", err)
			}
			m.done <- err
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10 s of the unmount")
		}
	})
	t.Run("returns on cancel and aborts the connection", func(t *testing.T) {
		m := startMount(t, host, Options{}, mountOpts{})
		use(m)
		m.cancel()
		select {
		case err := <-m.done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Serve = %v after cancel, want context.Canceled", err)
			}
			m.done <- nil
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return within 10 s of the cancel")
		}
		// Its descriptor was the last one: the processes of the mount get
		// ENOTCONN instead of waiting.
		_, err := os.Stat(m.p("a.txt"))
		wantErrno(t, "stat after cancel", err, unix.ENOTCONN)
	})
	t.Run("waits for a mount made after it started", func(t *testing.T) {
		m := startMount(t, host, Options{}, mountOpts{serveFirst: true})
		use(m)
	})
	t.Run("read-write use then end", func(t *testing.T) {
		m := startMount(t, host, Options{}, mountOpts{})
		for i := 0; i < 20; i++ {
			p := m.p(fmt.Sprintf("d/n%d", i))
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Rename(p, p+".r")
			os.Remove(p + ".r")
		}
	})
	// Every subtest's cleanup has run: nothing of theirs may be left.
	t.Cleanup(func() {
		if n := fdCount(t); n > fds {
			es, _ := os.ReadDir("/proc/self/fd")
			var l []string
			for _, e := range es {
				d, _ := os.Readlink("/proc/self/fd/" + e.Name())
				l = append(l, e.Name()+"="+d)
			}
			t.Errorf("%d descriptors after the mounts ended, %d before: %v", n, fds, l)
		}
		if n := settle(gs); n > gs {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines after the mounts ended, %d before:\n%s", n, gs, buf[:runtime.Stack(buf, true)])
		}
	})
}

func TestServeRejectsBadInput(t *testing.T) {
	dev := openFuse(t)
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	err = Serve(context.Background(), dev, f, Options{})
	if !errors.Is(err, ErrNotDirectory) {
		t.Errorf("Serve on a regular file = %v, want ErrNotDirectory", err)
	}
	// Not mounted, and cancelled: Serve returns the context's error.
	dev = openFuse(t)
	root, _ := os.Open(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Serve(ctx, dev, root, Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Serve on an unmounted descriptor = %v, want the context's deadline", err)
	}
}

// Walking more files than MaxNodes keeps the server's descriptors bounded:
// it asks the kernel to drop the oldest nodes, and closes them at FORGET.
func TestPruneBoundsDescriptors(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 1500; i++ {
		files[fmt.Sprintf("d%02d/f%04d", i%30, i)] = "x"
	}
	host := tree(t, files)
	m := startMount(t, host, Options{MaxNodes: 200}, mountOpts{})
	if !m.info.Prune {
		t.Skipf("the kernel (FUSE minor %d) has no prune notifications", m.info.KernelMinor)
	}
	before := fdCount(t)
	peak := 0
	for name := range files {
		var st unix.Stat_t
		if err := unix.Stat(m.p(name), &st); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, fdCount(t)-before)
	}
	t.Logf("1500 files stat'ed: at most %d more descriptors", peak)
	if peak > 600 {
		t.Errorf("%d descriptors held for 1500 files with MaxNodes 200", peak)
	}
}
