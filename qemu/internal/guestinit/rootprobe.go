package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The root probe is a test of the host's, never a program's: it shows that
// the guest's real root (pid 1, every capability, before any program runs)
// cannot change a share that QEMU exports readonly=on, even after making the
// guest's mount of it writable. The host asks for it on the guest kernel's
// command line (rootProbeFlag=s0,s1: the 9p tags to probe), which only the
// host sets: the provider never does, its tests do, on a VM booted cold and
// never saved. For each tag, the init mounts the share read-only as for a
// program, makes the mount writable again (a remount of the superblock, then
// of the mount), tries every kind of change in <mount>/remount, unmounts it,
// mounts the tag again writable and tries them all again in <mount>/mount.
// It reports each result on the console, one line a pass:
//
//	pysb-rootprobe <tag> <pass> step=errno ...
//
// (0: done), then "pysb-rootprobe end", and goes on with its boot.

// rootProbeFlag is the guest kernel's parameter that asks for the probe.
const rootProbeFlag = "pysb.rootprobe"

// rootProbeTag is a 9p tag the host gives its shares (vm.go).
var rootProbeTag = regexp.MustCompile(`^s([0-9]|1[01])$`)

// rootProbeTags returns the tags that the kernel's command line cmdline asks
// the probe for: nil when it does not ask (the flag is missing, or malformed).
func rootProbeTags(cmdline string) []string {
	var tags []string
	for _, f := range strings.Fields(cmdline) {
		v, ok := strings.CutPrefix(f, rootProbeFlag+"=")
		if !ok {
			continue
		}
		if tags != nil {
			return nil // given twice
		}
		for _, t := range strings.Split(v, ",") {
			if !rootProbeTag.MatchString(t) {
				return nil
			}
			tags = append(tags, t)
		}
	}
	return tags
}

// rootProbe runs the probe when the kernel's command line asks for it.
func rootProbe() {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return
	}
	tags := rootProbeTags(string(b))
	if tags == nil {
		return
	}
	for _, tag := range tags {
		probeShare(tag)
	}
	fmt.Fprintln(os.Stderr, "pysb-rootprobe end")
}

// probeResult is one pass's line.
type probeResult struct {
	tag, pass string
	steps     []string
}

func (r *probeResult) add(step string, err error) {
	var n syscall.Errno
	if err != nil {
		e, ok := err.(syscall.Errno)
		if !ok {
			e = syscall.EIO // not an errno (not expected of a system call)
		}
		n = e
	}
	r.steps = append(r.steps, fmt.Sprintf("%s=%d", step, int(n)))
}

func (r *probeResult) print() {
	fmt.Fprintf(os.Stderr, "pysb-rootprobe %s %s %s\n", r.tag, r.pass, strings.Join(r.steps, " "))
}

// probeShare runs both passes on the share tag.
func probeShare(tag string) {
	dir := "/.rootprobe/" + tag
	os.MkdirAll(dir, 0o700)
	flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV)

	r := &probeResult{tag: tag, pass: "remount"}
	err := syscall.Mount(tag, dir, "9p", flags|syscall.MS_RDONLY, p9optsRO)
	r.add("mount-ro", err)
	if err == nil {
		r.add("remount-sb", syscall.Mount("", dir, "", flags|syscall.MS_REMOUNT, p9optsRO))
		r.add("remount-bind", syscall.Mount("", dir, "", flags|syscall.MS_REMOUNT|syscall.MS_BIND, ""))
		r.writable(dir)
		tryChanges(r, dir+"/remount")
		r.add("umount", syscall.Unmount(dir, 0))
	}
	r.print()

	r = &probeResult{tag: tag, pass: "mount"}
	err = syscall.Mount(tag, dir, "9p", flags, p9optsRW)
	r.add("mount-rw", err)
	if err == nil {
		r.writable(dir)
		tryChanges(r, dir+"/mount")
		r.add("umount", syscall.Unmount(dir, 0))
	}
	r.print()
}

// writable reports whether the guest's mount at dir is writable (0) or
// read-only (EROFS): a change refused with the mount writable is refused by
// QEMU, not by the guest's kernel.
func (r *probeResult) writable(dir string) {
	var st unix.Statfs_t
	err := unix.Statfs(dir, &st)
	if err == nil && st.Flags&unix.ST_RDONLY != 0 {
		err = syscall.EROFS
	}
	r.add("writable", err)
}

// tryChanges tries each kind of change of the files in d, each on a file of
// its own (the host lays them out): f, w, a, t, ot, fa, u, r, c, o, m, x
// (with the attribute user.k) and the empty directory e.
func tryChanges(r *probeResult, d string) {
	openW := func(name string, flag int) (int, error) {
		return unix.Open(d+"/"+name, flag|unix.O_CLOEXEC, 0o644)
	}
	writeTo := func(name string, flag int, data string) error {
		fd, err := openW(name, flag)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, []byte(data))
		if err == nil {
			err = unix.Fsync(fd)
		}
		return err
	}
	r.add("create", writeTo("new", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, "new"))
	r.add("write", writeTo("w", unix.O_WRONLY, "changed"))
	r.add("append", writeTo("a", unix.O_WRONLY|unix.O_APPEND, "more"))
	r.add("truncate", unix.Truncate(d+"/t", 0))
	otrunc := func() error {
		fd, err := openW("ot", unix.O_RDWR|unix.O_TRUNC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	r.add("open-trunc", otrunc())
	fallocate := func() error {
		fd, err := openW("fa", unix.O_WRONLY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fallocate(fd, 0, 0, 1<<16)
	}
	r.add("fallocate", fallocate())
	r.add("unlink", unix.Unlink(d+"/u"))
	r.add("rename", unix.Rename(d+"/r", d+"/r2"))
	r.add("mkdir", unix.Mkdir(d+"/nd", 0o755))
	r.add("rmdir", unix.Rmdir(d+"/e"))
	r.add("symlink", unix.Symlink("f", d+"/sl"))
	r.add("link", unix.Link(d+"/f", d+"/hl"))
	r.add("chmod", unix.Chmod(d+"/c", 0o4777))
	r.add("chown", unix.Lchown(d+"/o", 1234, 1234))
	r.add("utimes", unix.UtimesNano(d+"/m", []unix.Timespec{{Sec: 1}, {Sec: 2}}))
	r.add("setxattr", unix.Setxattr(d+"/x", "user.new", []byte("v"), 0))
	r.add("replacexattr", unix.Setxattr(d+"/x", "user.k", []byte("changed"), unix.XATTR_REPLACE))
	r.add("removexattr", unix.Removexattr(d+"/x", "user.k"))
	// A POSIX ACL (version 2: the owner rwx, the group r, others r).
	acl := []byte{2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff}
	r.add("setacl", unix.Setxattr(d+"/c", "system.posix_acl_access", acl, 0))
	r.add("mknod-fifo", unix.Mknod(d+"/fifo", unix.S_IFIFO|0o644, 0))
	r.add("mknod-chr", unix.Mknod(d+"/chr", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
}
