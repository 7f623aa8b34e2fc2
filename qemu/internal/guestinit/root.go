package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pysandboxes/pysandboxes/qemu/internal/wire"
)

// p9opts are the 9p mount options: a read-only share is cached in the
// guest (cache=loose: every later exec of the same files is fast); a
// writable one writes through to the host at once (cache=mmap: no write-back
// cache in the guest, shared mappings still work).
const (
	p9optsRO = "trans=virtio,version=9p2000.L,cache=loose,msize=262144"
	p9optsRW = "trans=virtio,version=9p2000.L,cache=mmap,msize=262144"
)

// buildRoot makes the programs' root at viewRoot: a tmpfs built by ops, then
// made read-only.
func buildRoot(ops []wire.Op) error {
	if err := os.MkdirAll(viewRoot, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", viewRoot, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755,size=8m"); err != nil {
		return fmt.Errorf("the root's tmpfs: %w", err)
	}
	for _, d := range []string{"/proc", "/dev", "/tmp"} {
		os.MkdirAll(viewRoot+d, 0o755)
	}
	// /tmp is a tmpfs of the VM's (exposed directories under /tmp are mounted
	// in it); a program whose /tmp holds no share gets one of its own.
	if err := syscall.Mount("tmpfs", viewRoot+"/tmp", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	if err := os.WriteFile("/.mask-file", nil, 0); err != nil {
		return err
	}
	os.Mkdir("/.mask-dir", 0)
	os.Chmod("/.mask-dir", 0)
	var remount []string
	for _, op := range ops {
		if !filepath.IsAbs(op.Path) || filepath.Clean(op.Path) != op.Path || strings.Contains(op.Path, "/../") {
			return fmt.Errorf("%s %q: not a clean absolute path", op.Op, op.Path)
		}
		dst := viewRoot + op.Path
		hidden := strings.HasPrefix(op.Path, "/.s/")
		if hidden {
			dst = op.Path
		}
		var err error
		switch op.Op {
		case wire.OpDir:
			err = os.MkdirAll(dst, 0o755)
		case wire.OpSymlink:
			os.MkdirAll(filepath.Dir(dst), 0o755)
			err = os.Symlink(op.Src, dst)
		case wire.OpShare:
			if err = os.MkdirAll(dst, 0o755); err != nil {
				break
			}
			flags, opts := uintptr(syscall.MS_NOSUID|syscall.MS_NODEV), p9optsRW
			if op.RO {
				flags, opts = flags|syscall.MS_RDONLY, p9optsRO
			}
			err = syscall.Mount(op.Tag, dst, "9p", flags, opts)
		case wire.OpBind:
			var st syscall.Stat_t
			if err = syscall.Stat(op.Src, &st); err != nil {
				break
			}
			if err = mountPoint(dst, st.Mode&syscall.S_IFMT == syscall.S_IFDIR); err != nil {
				break
			}
			if err = syscall.Mount(op.Src, dst, "", syscall.MS_BIND, ""); err == nil {
				remount = append(remount, dst)
			}
		case wire.OpFile:
			os.MkdirAll(filepath.Dir(dst), 0o755)
			err = os.WriteFile(dst, op.Data, 0o644)
		case wire.OpMask:
			var s syscall.Stat_t
			if syscall.Lstat(dst, &s) != nil {
				continue
			}
			src := "/.mask-file"
			if s.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				src = "/.mask-dir"
			}
			if err = syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err == nil {
				remount = append(remount, dst)
			}
		default:
			err = fmt.Errorf("unknown operation")
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", op.Op, op.Path, err)
		}
	}
	for _, d := range remount {
		if err := syscall.Mount("", d, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", d, err)
		}
	}
	// The root's own tmpfs: read-only (its mounts keep their own flags).
	if err := syscall.Mount("", viewRoot, "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755,size=8m"); err != nil {
		return fmt.Errorf("read-only root: %w", err)
	}
	return nil
}

// mountPoint makes dst as a directory or an empty file (its parents too).
func mountPoint(dst string, dir bool) error {
	if dir {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		if _, serr := os.Stat(dst); serr == nil {
			return nil
		}
		return err
	}
	return f.Close()
}
