package qemu

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/hidefs"
	"github.com/pysandboxes/pysandboxes/internal/hideview"
	"github.com/pysandboxes/pysandboxes/policy"
	"golang.org/x/sys/unix"
)

// The ignore= filter under QEMU.
//
// QEMU's 9p server reads the exposed directories on the host. A mask the
// guest's init mounts over an ignored path covers what is there when the VM
// starts; a file the host creates later, or renames onto an ignored name,
// would be shared. So, where the host can serve it (as root, /dev/fuse: see
// hideview.Available), every exposed directory an ignore= rule can reach is
// served to QEMU through the filter of package hidefs, the one the other
// providers use: QEMU starts in a mount namespace of its own, made by the
// host binary started again (viewMarker), in which the filter is mounted over
// each such directory, then the helper executes QEMU. The filter hides the
// ignored names at every lookup, for the VM's life; QEMU never reads them.
// The namespace ends with QEMU, and the filter's connection with it.

// viewMarker is argv[0] of the host binary started again to mount the
// filters in a mount namespace of its own, make QEMU's jail there (jail.go)
// and execute QEMU. Its arguments: the number n of filters, then n groups of
// four (the directory, its identity as the filter opened it ("dev:ino"), the
// descriptor of its /dev/fuse connection, "ro" or "rw"), then the jail (its
// JSON, or "-" for none), then QEMU's path and arguments.
const viewMarker = "pysandboxes-qemu-view"

// viewExit is the helper's exit status when it cannot make the view.
const viewExit = 125

// qemuView is the filtered directories of one VM.
type qemuView struct {
	servers *hideview.Servers
	dirs    []policy.Expose
}

// startView starts serving the filtered directories (nil when there are
// none). The caller passes files() to QEMU's process and calls started once
// it runs, stop once it has exited.
func startView(served, exposes []policy.Expose, ignores []policy.Ignore) (*qemuView, error) {
	if len(served) == 0 {
		return nil, nil
	}
	// Parents first: a filter mounted over a directory would cover the one
	// mounted beneath it before.
	served = slices.Clone(served)
	sort.SliceStable(served, func(i, j int) bool { return depth(served[i].Path) < depth(served[j].Path) })
	// QEMU runs as this process: the files it owns are shown as its own.
	me := hidefs.IDs{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	s, err := hideview.Start(served, hideview.Paths(exposes), ignores, me, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("qemu: ignore=: %w", err)
	}
	return &qemuView{servers: s, dirs: served}, nil
}

// helperArgs returns the helper's arguments around QEMU's: the filters of w
// (nil: none), for a process whose first filter descriptor is base, and the
// jail (nil: none).
func helperArgs(w *qemuView, jail *jailSpec, qemu string, args []string, base int) []string {
	if w == nil {
		w = &qemuView{}
	}
	out := []string{viewMarker, strconv.Itoa(len(w.dirs))}
	if len(w.dirs) > 0 {
		roots := w.servers.Roots()
		for i, d := range w.dirs {
			mode := "rw"
			if d.Mode != policy.ReadWrite {
				mode = "ro"
			}
			id := fmt.Sprintf("%d:%d", roots[i].Dev, roots[i].Ino)
			out = append(out, d.Path, id, strconv.Itoa(base+i), mode)
		}
	}
	out = append(out, jailArg(jail), qemu)
	return append(out, args...)
}

func (w *qemuView) files() []*os.File {
	if w == nil {
		return nil
	}
	return w.servers.Files()
}

// started closes this process's copies of the connections (the mounts hold
// them now).
func (w *qemuView) started() {
	if w != nil {
		w.servers.Started()
	}
}

// stop ends the servers (their connections end with QEMU's namespace).
func (w *qemuView) stop() {
	if w != nil {
		w.servers.Stop(2 * time.Second)
	}
}

// viewMain takes the process over when it is the view's helper: it mounts
// the filters in a mount namespace of its own and executes QEMU, or exits
// with viewExit, saying why on its standard error (QEMU's).
func viewMain() {
	if len(os.Args) < 2 || os.Args[0] != viewMarker {
		return
	}
	// The namespace is this thread's: the same thread mounts and executes.
	runtime.LockOSThread()
	if err := makeView(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "qemu: QEMU's namespace: %v\n", err)
		os.Exit(viewExit)
	}
}

func makeView(args []string) error {
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 || len(args) < 3+4*n {
		return fmt.Errorf("bad arguments %q", args)
	}
	var jail *jailSpec
	if a := args[1+4*n]; a != "-" {
		jail = &jailSpec{}
		if err := json.Unmarshal([]byte(a), jail); err != nil {
			return fmt.Errorf("bad jail %q: %w", a, err)
		}
	}
	if n > 0 || (jail != nil && !jail.Landlock) {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		// Nothing of this namespace reaches the host's.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making / private: %w", err)
		}
	}
	owner := hidefs.IDs{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	// The filters mounted so far (parents come first), with the device their
	// mount shows: a directory beneath one is reached through it, which shows
	// the directory's own inode number.
	type mounted struct {
		dir string
		dev uint64
	}
	var done []mounted
	for i := 0; i < n; i++ {
		dir, id, fds, mode := args[1+4*i], args[2+4*i], args[3+4*i], args[4+4*i]
		fd, err := strconv.Atoi(fds)
		if err != nil || fd < 3 {
			return fmt.Errorf("bad descriptor %q", fds)
		}
		var want hideview.FileID
		if _, err := fmt.Sscanf(id, "%d:%d", &want.Dev, &want.Ino); err != nil {
			return fmt.Errorf("bad identity %q", id)
		}
		// The directory itself, no link on the way (a link swapped in would
		// move the mount elsewhere, and leave the directory unfiltered).
		t, err := unix.Openat2(unix.AT_FDCWD, dir, how)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(t, &st); err != nil {
			unix.Close(t)
			return fmt.Errorf("%s: %w", dir, err)
		}
		same := st.Dev == want.Dev && st.Ino == want.Ino
		for _, m := range done {
			if strings.HasPrefix(dir, m.dir+"/") && st.Dev == m.dev && st.Ino == want.Ino {
				same = true
			}
		}
		if !same {
			unix.Close(t)
			return fmt.Errorf("%s is no longer the directory the filter serves", dir)
		}
		flags := uintptr(hidefs.MountFlags)
		if mode == "ro" {
			flags |= unix.MS_RDONLY
		}
		err = unix.Mount("pysandboxes", "/proc/self/fd/"+strconv.Itoa(t), "fuse.pysandboxes", flags, hidefs.MountData(fd, owner))
		unix.Close(t)
		if err != nil {
			return fmt.Errorf("%s: mount: %w", dir, err)
		}
		// The server's descriptor is now the connection's last but the
		// mount's: its end aborts the connection.
		unix.Close(fd)
		if t, err = unix.Openat2(unix.AT_FDCWD, dir, how); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		err = unix.Fstat(t, &st)
		unix.Close(t)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		done = append(done, mounted{dir, st.Dev})
	}
	rest := args[2+4*n:]
	switch {
	case jail != nil && jail.Landlock:
		if err := landlockJail(jail); err != nil {
			return fmt.Errorf("QEMU's Landlock domain: %w", err)
		}
	case jail != nil:
		if err := enterJail(jail); err != nil {
			return fmt.Errorf("QEMU's jail: %w", err)
		}
	}
	qemuArgs := append([]string{"qemu-system-x86_64"}, rest[1:]...)
	return fmt.Errorf("executing %s: %w", rest[0], unix.Exec(rest[0], qemuArgs, os.Environ()))
}
