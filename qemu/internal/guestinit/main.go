// Command guestinit is the init (pid 1) of the qemu provider's guest: a static
// Go binary that the provider embeds and packs into the initramfs it builds.
//
// At boot it mounts /proc, /sys and /dev, loads the kernel modules listed in
// /modules.order (virtio, 9p) with finit_module, finds the virtio-serial port
// named pysb.ctl, says hello to the host on it and waits: a saved VM state is
// taken at that point. The host's Setup then sets the clock, reseeds the random
// pool, mounts the 9p shares (the programs' root and the exposed directories)
// and masks the ignored paths. Each Spawn then starts a program (package
// wire): the init starts itself again as the program's stage 2, in new pid,
// mount, IPC and UTS namespaces, which mounts a private /proc, /tmp and /dev,
// changes root, applies the resource limits and starts the program as the
// share's owner with no capability (SECBIT_NOROOT, no_new_privs), then reaps
// its namespace and reports the program's wait status. The init relays the
// program's descriptors (pipes and socket pairs of its own) to the host's
// streams. A test of the host's may ask, on the kernel's command line, for
// a probe of the shares by the guest's root before the hello (rootprobe.go).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// stage2Marker is argv[0] of the init started again as a program's stage 2.
const stage2Marker = "pysb-stage2"

// viewRoot is where the programs' root is mounted.
const viewRoot = "/view"

func main() {
	if len(os.Args) > 0 && os.Args[0] == stage2Marker {
		os.Exit(stage2())
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "guestinit: not pid 1")
		os.Exit(2)
	}
	// The first spare stage 2 (spare.go), started first: its runtime comes
	// up while the init waits (for its control port, for the host), and a
	// saved VM state holds it ready.
	first := &spares{}
	first.fill()
	port, err := boot()
	if err != nil {
		fatalConsole(err)
	}
	// A test of the host's only, asked on the kernel's command line
	// (rootprobe.go).
	rootProbe()
	if err := batchInit(); err != nil {
		fatalConsole(err)
	}
	g := newGuest(port)
	g.bootTimes = bootTimes
	g.spares = first
	err = g.serve()
	fatalConsole(fmt.Errorf("the host's channel ended: %w", err))
}

// fatalConsole reports on the console and powers off.
func fatalConsole(err error) {
	fmt.Fprintf(os.Stderr, "pysandboxes guest init: %v\n", err)
	syscall.Sync()
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

// boot mounts the kernel's file systems, loads the modules and opens the
// control port.
func boot() (*os.File, error) {
	mark("init")
	for _, m := range []struct{ src, dst, fs string }{
		{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := syscall.Mount(m.src, m.dst, m.fs, syscall.MS_NOSUID, ""); err != nil && err != syscall.EBUSY {
			return nil, fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	if err := hardenKernel(); err != nil {
		return nil, err
	}
	mark("mounts")
	if err := loadModules("/modules.order"); err != nil {
		return nil, err
	}
	mark("modules")
	// The loopback interface every guest has (with or without a network
	// device): up now, so that a guest restored from a saved state has it up
	// already (under TCG, the first netlink and ioctl paths cost ~17 ms).
	if err := loopbackUp(); err != nil {
		return nil, fmt.Errorf("loopback: %w", err)
	}
	dev, err := findPort("pysb.ctl", 10*time.Second)
	if err != nil {
		return nil, err
	}
	mark("port")
	return os.OpenFile(dev, os.O_RDWR, 0)
}

// bootTimes says when the init started (the kernel's account of the
// process's start) and reached each step of its boot, in milliseconds of the
// guest's monotonic clock (from the kernel's start): the hello carries it, for
// the host's log.
var bootTimes string

func mark(step string) {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	bootTimes += fmt.Sprintf(" %s=%d", step, ts.Nano()/1e6)
	if !strings.HasPrefix(bootTimes, "exec=") {
		// Field 22 of /proc/self/stat: the start, in clock ticks (USER_HZ,
		// 100 a second), once /proc is mounted.
		if b, err := os.ReadFile("/proc/self/stat"); err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) > 19 {
					var ticks int64
					fmt.Sscan(f[19], &ticks)
					bootTimes = fmt.Sprintf("exec=%d", ticks*10) + bootTimes
				}
			}
		}
	}
}

func prctl(op int, arg uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, uintptr(op), arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// loadModules loads the modules named in order (one path a line), in order.
func loadModules(order string) error {
	b, err := os.ReadFile(order)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	empty := []byte{0}
	for _, name := range strings.Fields(string(b)) {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		_, _, e := syscall.Syscall(sysFinitModule, f.Fd(), uintptr(unsafe.Pointer(&empty[0])), 0)
		f.Close()
		if e != 0 && e != syscall.EEXIST {
			return fmt.Errorf("loading %s: %w", name, e)
		}
	}
	return nil
}

// findPort waits for the virtio-serial port named name and returns its device.
func findPort(name string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		ents, _ := os.ReadDir("/sys/class/virtio-ports")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/sys/class/virtio-ports", e.Name(), "name"))
			if err == nil && strings.TrimSpace(string(b)) == name {
				dev := "/dev/" + e.Name()
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %s", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readJSON decodes a frame's payload.
func readJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", wire.ErrFrame, err)
	}
	return nil
}

func uintptrOf[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

const (
	sysFinitModule  = 313
	prSetNoNewPrivs = 38
)
