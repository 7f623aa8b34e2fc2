package netfilter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// This file holds the raw namespace work: opening and checking a network
// namespace, running code on a thread that joined one, bringing an interface up,
// writing the namespace's sysctls, and named namespaces.

// openNetNS opens the network namespace at path and checks that it is one, and
// that it is not the host's own.
func openNetNS(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("network namespace %s: %w", path, err)
	}
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil || typ != unix.CLONE_NEWNET {
		unix.Close(fd)
		if err == nil {
			err = errors.New("not a network namespace")
		}
		return -1, fmt.Errorf("network namespace %s: %w", path, err)
	}
	var st, self unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("network namespace %s: %w", path, err)
	}
	// The calling thread is in the host's namespace (only the locked threads of
	// this package ever leave it, and they come back).
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err == nil && st.Dev == self.Dev && st.Ino == self.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("network namespace %s: it is the host's own network namespace, not a sandbox's", path)
	}
	return fd, nil
}

// inNetNS runs fn on an OS thread that joined the network namespace open as fd,
// and moves the thread back to its own namespace afterwards. Should that fail,
// the thread stays locked and the runtime ends it with the goroutine.
func inNetNS(fd int, fn func() error) error {
	return onThread(func() error {
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		return fn()
	})
}

// inNewNetNS runs fn on an OS thread that moved into a new network namespace and
// returns a descriptor of that namespace (which keeps it alive), or an error.
func inNewNetNS(fn func() error) (int, error) {
	nsfd := -1
	err := onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if fn != nil {
			if err := fn(); err != nil {
				unix.Close(fd)
				return err
			}
		}
		nsfd = fd
		return nil
	})
	return nsfd, err
}

// onThread runs fn on a locked OS thread, then puts the thread back into the
// network namespace it had (fn may change it) and unlocks it. When that fails the
// thread stays locked, and the runtime ends it with the goroutine.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("the thread's network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		err = fn()
		if rerr := unix.Setns(orig, unix.CLONE_NEWNET); rerr != nil {
			errc <- err // the thread is discarded (still locked)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// checkFresh refuses a namespace (the calling thread's) that has interfaces other
// than lo: the filter must see every way out.
func checkFresh() error {
	// /proc/thread-self/net/dev lists the interfaces of the thread's namespace:
	// two header lines, then "name: counters...".
	b, err := os.ReadFile("/proc/thread-self/net/dev")
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[min(2, len(lines)):] {
		name, _, ok := strings.Cut(l, ":")
		if name = strings.TrimSpace(name); ok && name != "lo" {
			return fmt.Errorf("it already has the interface %s (a sandbox's network namespace must have lo only)", name)
		}
	}
	return nil
}

// writeSysctl writes a sysctl of the calling thread's network namespace
// (/proc/sys/net is resolved per thread). A missing optional key is not an error.
func writeSysctl(key, value string, optional bool) error {
	p := filepath.Join("/proc/sys", key)
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("sysctl %s: %w", key, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(value)); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// privileged reports whether the process holds CAP_SYS_ADMIN and CAP_NET_ADMIN
// in its user namespace: what joining a sandbox's network namespace (setns) and
// changing its filter and interfaces take.
func privileged() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	return has(unix.CAP_SYS_ADMIN) && has(unix.CAP_NET_ADMIN)
}

// netnsRunDir is where named network namespaces live (as with `ip netns`).
const netnsRunDir = "/run/netns"

// NewNamed creates a persistent named network namespace (as `ip netns add` does:
// a namespace bound to /run/netns/NAME), the kind `firejail --netns=NAME` joins.
// It returns its name, its path and a cleanup that removes it (idempotent). Its
// only interface is lo, down; Setup brings it up and installs the filter. It needs
// CAP_SYS_ADMIN (root): otherwise the error wraps ErrUnprivileged.
func NewNamed(ctx context.Context) (name, path string, cleanup func() error, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", nil, err
	}
	if !privileged() {
		return "", "", nil, fmt.Errorf("netfilter: creating a named network namespace: %w", ErrUnprivileged)
	}
	if err := os.MkdirAll(netnsRunDir, 0o755); err != nil {
		return "", "", nil, fmt.Errorf("netfilter: %w", err)
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", "", nil, fmt.Errorf("netfilter: %w", err)
	}
	name = "pysandboxes-" + hex.EncodeToString(rnd[:])
	path = filepath.Join(netnsRunDir, name)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", "", nil, fmt.Errorf("netfilter: creating %s: %w", path, err)
	}
	unix.Close(fd)
	nsfd, err := inNewNetNS(func() error {
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting the namespace on %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
		return "", "", nil, fmt.Errorf("netfilter: %w", err)
	}
	unix.Close(nsfd)
	var once sync.Once
	var cerr error
	cleanup = func() error {
		once.Do(func() {
			if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				cerr = fmt.Errorf("netfilter: unmounting %s: %w", path, err)
				return
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				cerr = fmt.Errorf("netfilter: %w", err)
			}
		})
		return cerr
	}
	return name, path, cleanup, nil
}
