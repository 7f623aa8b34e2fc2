// Package diskcache keeps small per-user cache files (what an interpreter answered
// about its directories, compiled guard code...) so that a short-lived process,
// such as one python-sb run, does not recompute them. It trusts nothing it did not
// write: the directory and every file must be the user's own, not writable by
// others, and never a symbolic link; files are written atomically.
package diskcache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Dir returns the per-user cache directory: $XDG_CACHE_HOME/pysandboxes, else
// ~/.cache/pysandboxes. It is created (0700) when missing, and refused when it is
// not a directory owned by the user, or when it is writable by others.
func Dir() (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return "", errors.New("diskcache: no cache directory (neither XDG_CACHE_HOME nor HOME is set)")
		}
		base = filepath.Join(home, ".cache")
	}
	dir := filepath.Join(base, "pysandboxes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := checkOwned(dir, true); err != nil {
		return "", err
	}
	return dir, nil
}

// checkOwned refuses a path that is a symbolic link, not owned by the user, or
// writable by group or others.
func checkOwned(path string, dir bool) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	mode := st.Mode & syscall.S_IFMT
	switch {
	case dir && mode != syscall.S_IFDIR:
		return fmt.Errorf("diskcache: %s is not a directory", path)
	case !dir && mode != syscall.S_IFREG:
		return fmt.Errorf("diskcache: %s is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("diskcache: %s is not owned by the user (uid %d)", path, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("diskcache: %s is writable by others (mode %o)", path, st.Mode&0o777)
	}
	return nil
}

// Read reads the cache file name of dir, refusing one that is not the user's own,
// that is writable by others, or that is larger than max bytes. A missing file is
// fs.ErrNotExist.
func Read(dir, name string, max int64) ([]byte, error) {
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("diskcache: refusing %s (not a regular file of the user, or writable by others)", p)
	}
	if st.Size > max {
		return nil, fmt.Errorf("diskcache: %s is too large", p)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// Write writes the cache file name of dir atomically (a temporary file, mode 0600,
// renamed over it).
func Write(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp"+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	ok = true
	return nil
}
