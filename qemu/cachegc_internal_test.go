package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/needs"
)

// cacheFixture is a cache directory with helpers to fill it.
type cacheFixture struct {
	t     *testing.T
	cache string
}

func newCacheFixture(t *testing.T) *cacheFixture {
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	return &cacheFixture{t, cache}
}

func (c *cacheFixture) path(name string) string { return filepath.Join(c.cache, name) }

// file writes name with data, last modified age ago.
func (c *cacheFixture) file(name string, data []byte, age time.Duration) string {
	c.t.Helper()
	p := c.path(name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.age(p, age)
	return p
}

func (c *cacheFixture) age(p string, age time.Duration) {
	when := time.Now().Add(-age)
	if err := os.Chtimes(p, when, when); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cacheFixture) left() []string {
	ents, _ := os.ReadDir(c.cache)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestCleanGuestFiles: the clean-up keeps the records used in the last hour
// or among the keepRecords most recently used, with the kernels and
// initramfs they name, and what a usable saved state was made of; it
// deletes the other records, the kernels and initramfs nothing in use names
// (unless just made or reused), unreadable records, and what dead writers
// left.
func TestCleanGuestFiles(t *testing.T) {
	c := newCacheFixture(t)
	rec := func(name, vmlinux, initrd string, age time.Duration) {
		t.Helper()
		c.file(vmlinux, []byte("kernel"), 3*time.Hour)
		c.file(initrd, []byte("cpio"), 3*time.Hour)
		b, _ := json.Marshal(&prepared{Files: []string{"a", "b", "c"}, Vmlinux: c.path(vmlinux), Initrd: c.path(initrd)})
		c.file(name, b, age)
	}
	// The three most recently used are kept whatever their age; the older
	// ones, not used in the last hour, go.
	rec("prep-now", "vmlinux-now", "initramfs-now.cpio", 0)
	rec("prep-2h", "vmlinux-2h", "initramfs-2h.cpio", 2*time.Hour)
	rec("prep-3h", "vmlinux-3h", "initramfs-3h.cpio", 3*time.Hour)
	rec("prep-4h", "vmlinux-4h", "initramfs-4h.cpio", 4*time.Hour)
	rec("prep-5h", "vmlinux-5h", "initramfs-5h.cpio", 5*time.Hour)
	// Records sharing one kernel: it stays while one of them is in use.
	rec("prep-6h", "vmlinux-now", "initramfs-6h.cpio", 6*time.Hour)
	c.file("prep-garbage", []byte("{"), 0)
	// Named by nothing: an old one goes, one just made or reused (its
	// record not written yet) stays.
	c.file("vmlinux-orphan", []byte("kernel"), 2*time.Hour)
	c.file("initramfs-fresh.cpio", []byte("cpio"), time.Minute)
	// Named only by a usable saved state: kept; by an unusable one: not.
	qemuBin := c.file("qemu-binary", []byte("qemu"), 0)
	c.file("vmlinux-state", []byte("kernel"), 3*time.Hour)
	c.file("initramfs-state.cpio", []byte("cpio"), 3*time.Hour)
	m := &machine{QEMU: qemuBin, Kernel: c.path("vmlinux-state"), Initrd: c.path("initramfs-state.cpio"), Memory: 256, CPUs: 1}
	ids, err := identities(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(&stateMeta{Machine: m, Files: ids})
	c.file("state-k1.json", b, 0)
	c.file("vmlinux-unusable", []byte("kernel"), 3*time.Hour)
	m2 := *m
	m2.Kernel = c.path("vmlinux-unusable")
	b, _ = json.Marshal(&stateMeta{Machine: &m2, Files: []string{"changed since"}})
	c.file("state-k2.json", b, 0)
	// Dead writers' files, and a live writer's.
	c.file(".tmp-vmlinux-x-1", []byte("part"), 2*time.Hour)
	c.file(".tmp-prep-x-1", []byte("part"), 2*time.Hour)
	c.file(".tmp-initramfs-x-2", []byte("part"), 0)

	deleted := cleanGuestFiles(c.cache)
	slices.Sort(deleted)
	want := []string{".tmp-prep-x-1", ".tmp-vmlinux-x-1", "initramfs-4h.cpio", "initramfs-5h.cpio", "initramfs-6h.cpio",
		"prep-4h", "prep-5h", "prep-6h", "prep-garbage", "vmlinux-4h", "vmlinux-5h", "vmlinux-orphan", "vmlinux-unusable"}
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %v\nwant    %v", deleted, want)
	}
	left := c.left()
	for _, name := range []string{"prep-now", "vmlinux-now", "initramfs-now.cpio", "prep-2h", "vmlinux-2h", "prep-3h", "initramfs-3h.cpio",
		"initramfs-fresh.cpio", "vmlinux-state", "initramfs-state.cpio", ".tmp-initramfs-x-2"} {
		if !slices.Contains(left, name) {
			t.Errorf("%s was deleted", name)
		}
	}
	for _, name := range want {
		if slices.Contains(left, name) {
			t.Errorf("%s is left", name)
		}
	}
}

// TestGuestFilesCleanedOnChange: a changed init makes a new initramfs, and
// the one it replaces goes once no record in use names it.
func TestGuestFilesCleanedOnChange(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	os.Mkdir(cache, 0o700)
	mods := filepath.Join(dir, "lib", "modules", "6.1.0-test")
	os.MkdirAll(filepath.Join(mods, "kernel"), 0o755)
	image := filepath.Join(dir, "vmlinux-6.1.0-test")
	os.WriteFile(image, []byte("\x7fELF kernel"), 0o644)
	os.WriteFile(filepath.Join(mods, "modules.dep"), []byte("kernel/virtio_mmio.ko:\n"), 0o644)
	os.WriteFile(filepath.Join(mods, "modules.builtin"), []byte("kernel/virtio_console.ko\nkernel/9pnet_virtio.ko\nkernel/9p.ko\nkernel/virtio_net.ko\n"), 0o644)
	os.WriteFile(filepath.Join(mods, "kernel", "virtio_mmio.ko"), []byte("module"), 0o644)
	k := &kernel{Image: image, Version: "6.1.0-test", Modules: mods}
	var initrds []string
	for i := range keepRecords + 2 {
		_, initrd, err := guestFiles(cache, k, fmt.Appendf(nil, "init v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		initrds = append(initrds, initrd)
		// Its record (the one just written) and initramfs were last used
		// hours ago, the later ones less long ago.
		old := time.Now().Add(-time.Duration(10-i) * time.Hour)
		recs, _ := filepath.Glob(filepath.Join(cache, "prep-*"))
		for _, r := range recs {
			if st, err := os.Stat(r); err == nil && time.Since(st.ModTime()) < time.Minute {
				os.Chtimes(r, old, old)
			}
		}
		os.Chtimes(initrd, old, old)
	}
	for i, p := range initrds {
		_, err := os.Stat(p)
		if gone := errors.Is(err, fs.ErrNotExist); gone != (i < 2) {
			t.Errorf("initramfs %d: gone %v, want %v", i, gone, i < 2)
		}
	}
	if recs, _ := filepath.Glob(filepath.Join(cache, "prep-*")); len(recs) != keepRecords {
		t.Errorf("%d records left, want %d", len(recs), keepRecords)
	}
}

// TestMirrorLocked: a mirror is shared under a lock; the clean-up deletes
// the mirrors nobody holds that are old or beyond keepMirrors, never one a
// VM holds (another open file description's lock, as another process's)
// nor the one just made; and a mirror deleted while its lock was awaited is
// reported gone, not used half deleted.
func TestMirrorLocked(t *testing.T) {
	c := newCacheFixture(t)
	host := t.TempDir()
	var ns []needs.Need
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(host, n)
		os.WriteFile(p, []byte(n), 0o644)
		ns = append(ns, needs.Need{Path: p})
	}
	dir, lock, err := mirrorFiles(c.cache, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, host, "a")); err != nil || string(b) != "a" {
		t.Fatalf("the mirror's file: %q, %v", b, err)
	}
	// Found again, under another lock.
	again, lock2, err := mirrorFiles(c.cache, ns, nil)
	if err != nil || again != dir {
		t.Fatalf("not found again: %s, %v", again, err)
	}
	lock2.Close()
	// Held (by lock), however old: kept.
	c.age(dir, 5*time.Hour)
	// Not held: old ones go; fresh ones beyond keepMirrors go.
	mk := func(name string, age time.Duration) {
		os.Mkdir(c.path(name), 0o755)
		os.WriteFile(filepath.Join(c.path(name), "f"), nil, 0o644)
		c.age(c.path(name), age)
	}
	mk("files-old", 2*time.Hour)
	for i := range keepMirrors + 1 {
		mk(fmt.Sprintf("files-fresh%02d", i), time.Duration(i+1)*time.Minute)
	}
	mk("files-new", 0)
	mk(".tmp-files-dead", 2*time.Hour)
	mk(".tmp-files-live", 0)
	mk(mirrorGone+"dead", 2*time.Hour)

	deleted := cleanMirrors(c.cache, "files-new")
	slices.Sort(deleted)
	want := []string{".tmp-files-dead", mirrorGone + "dead", "files-fresh07", "files-fresh08", "files-old"}
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %v\nwant    %v", deleted, want)
	}
	left := c.left()
	for _, name := range []string{filepath.Base(dir), "files-new", "files-fresh00", "files-fresh06", ".tmp-files-live"} {
		if !slices.Contains(left, name) {
			t.Errorf("%s was deleted", name)
		}
	}
	// Released: the old mirror goes at the next clean-up.
	lock.Close()
	if d := cleanMirrors(c.cache, "files-new"); !slices.Contains(d, filepath.Base(dir)) {
		t.Errorf("after its release, %s was not deleted: %v", dir, d)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the released mirror is still there: %v", err)
	}

	// A mirror deleted while a process awaits its lock.
	mk("files-contended", 0)
	held, err := os.Open(c.path("files-contended"))
	if err != nil {
		t.Fatal(err)
	}
	if err := flock(held, syscall.LOCK_EX, true); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		f, err := lockMirror(c.path("files-contended"))
		if f != nil {
			f.Close()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // most likely waiting in flock(2) by now; either way it must fail
	gone := c.path("gone")
	os.Mkdir(gone, 0o700)
	if err := os.Rename(c.path("files-contended"), filepath.Join(gone, "x")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(gone)
	held.Close()
	if err := <-got; !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a mirror deleted under the lock: %v, want ErrNotExist", err)
	}
	// mirrorFiles makes it again after a clean-up deleted it.
	os.RemoveAll(again)
	if dir3, lock3, err := mirrorFiles(c.cache, ns, nil); err != nil || dir3 != dir {
		t.Errorf("made again: %s, %v", dir3, err)
	} else {
		lock3.Close()
	}
}

// TestCacheLock: one process at a time makes saved states (or the guest's
// files); another waits (or gives up with its context).
func TestCacheLock(t *testing.T) {
	c := newCacheFixture(t)
	unlock, err := lockCache(context.Background(), c.cache, statesLock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := lockCache(ctx, c.cache, statesLock); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second maker did not wait: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		u, err := lockCache(context.Background(), c.cache, statesLock)
		if err == nil {
			u()
		}
		done <- err
	}()
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
