package netif

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUp brings lo up in a new network namespace of a thread of its own (the
// thread ends with the test's goroutine, never given back to the runtime).
func TestUp(t *testing.T) {
	type result struct {
		skip                 string
		before, after        bool
		err, again, noSuchIf error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its namespace
		var r result
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			r.skip = "cannot make a network namespace: " + err.Error()
			done <- r
			return
		}
		r.before = isUp(t, "lo")
		r.err = Up("lo")
		r.after = isUp(t, "lo")
		r.again = Up("lo")
		r.noSuchIf = Up("pysb-none0")
		done <- r
	}()
	r := <-done
	if r.skip != "" {
		t.Skip(r.skip)
	}
	if r.before || r.err != nil || !r.after {
		t.Fatalf("lo up before: %v; Up: %v; up after: %v", r.before, r.err, r.after)
	}
	if r.again != nil {
		t.Errorf("Up of an interface already up: %v", r.again)
	}
	if !errors.Is(r.noSuchIf, unix.ENODEV) {
		t.Errorf("Up of a missing interface: %v, want ENODEV", r.noSuchIf)
	}
}

func isUp(t *testing.T, name string) bool {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Error(err)
		return false
	}
	defer unix.Close(s)
	ifr, _ := unix.NewIfreq(name)
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Error(err)
		return false
	}
	return ifr.Uint16()&unix.IFF_UP != 0
}
