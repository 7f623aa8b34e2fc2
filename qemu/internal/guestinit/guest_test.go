package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// polled reports whether descriptor fd is watched by one of this process's
// epoll instances (the Go runtime's poller), from /proc/self/fdinfo.
func polled(t *testing.T, fd uintptr) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Skipf("no /proc/self/fdinfo: %v", err)
	}
	want := strconv.FormatUint(uint64(fd), 10)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// tfd: <fd> events: <mask> data: ...
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "tfd:" && f[1] == want {
				return true
			}
		}
	}
	return false
}

// TestOpenUnpolled: the VM's own port is held open by the init without the
// runtime's poller watching it (which would wake the init at each chunk that
// passes through the port), and blocking (the program that gets it as its
// channel waits for room instead of failing with EAGAIN). A pseudo-terminal
// stands in for the port: a character device epoll can watch.
func TestOpenUnpolled(t *testing.T) {
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skipf("no /dev/ptmx to stand in for the port: %v", err)
	}
	// The check sees what os.OpenFile does to such a device.
	ref, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("/dev/ptmx: %v", err)
	}
	defer ref.Close()
	if !polled(t, ref.Fd()) {
		t.Fatal("a device opened with os.OpenFile is not seen in the runtime's poller: the check cannot tell")
	}

	f, err := openUnpolled("/dev/ptmx")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if polled(t, f.Fd()) {
		t.Error("the port's descriptor is watched by the runtime's poller")
	}
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.O_NONBLOCK != 0 {
		t.Error("the port's descriptor is non-blocking")
	}
	if _, err := openUnpolled(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("opening a missing device: %v, want an error naming it", err)
	}
}
