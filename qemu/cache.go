package qemu

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pysandboxes/pysandboxes/internal/diskcache"
)

// cacheDir returns the provider's directory in the user's cache.
func cacheDir() (string, error) {
	d, err := diskcache.Dir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(d, "qemu")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := checkOwned(dir, true); err != nil {
		return "", err
	}
	return dir, nil
}

// checkOwned refuses a path that is a symbolic link, not the user's own, or
// writable by others.
func checkOwned(path string, dir bool) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return err
	}
	mode := st.Mode & syscall.S_IFMT
	switch {
	case dir && mode != syscall.S_IFDIR, !dir && mode != syscall.S_IFREG:
		return fmt.Errorf("qemu: %s is not a regular file or directory of the cache", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("qemu: %s is not owned by the user", path)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("qemu: %s is writable by others", path)
	}
	return nil
}

func checkCacheFile(path string) error { return checkOwned(path, false) }

// writeCacheFile writes data to path atomically (a temporary file renamed).
func writeCacheFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("qemu: writing %s: %w", path, err)
	}
	return nil
}

func gunzip(p []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(p))
	if err != nil {
		return nil, err
	}
	zr.Multistream(false)
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(zr, maxUnpacked+1))
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	if n > maxUnpacked {
		return nil, fmt.Errorf("more than %d bytes unpacked", maxUnpacked)
	}
	return out.Bytes(), nil
}
