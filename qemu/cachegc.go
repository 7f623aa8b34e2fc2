package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The cache holds, besides the saved states (snapshot.go):
//   - the guest's kernels (vmlinux-*, about 66 MB each) and initramfs
//     (initramfs-*.cpio), with the records of what they were made of
//     (prep-*, guestfiles.go);
//   - the mirrors of single host files (files-*, plan.go): directories of
//     hard links (or copies), one per set of files a VM needs.
//
// A kernel or initramfs is kept while a record in use or a usable saved
// state names it; a record is in use when it was used in the last
// recentUse or is among the keepRecords most recently used. A mirror no VM
// shares (a VM holds a shared flock(2) lock on its mirror until QEMU exits)
// is deleted when it was not used in the last recentUse or is beyond the
// keepMirrors most recently used: it costs a few links to make again. Use is
// the modification time, set at each use. The clean-ups run when something new is made (a
// new record, a new mirror): only then can something have become stale.
const (
	keepRecords = 3
	keepMirrors = 8
	recentUse   = time.Hour
	mirrorGone  = ".tmp-files-gone-"
)

// touch marks path used now.
func touch(path string) {
	now := time.Now()
	os.Chtimes(path, now, now)
}

// cleanGuestFiles deletes from the cache the records no longer in use, the
// kernels and initramfs no record in use or usable saved state names, and
// what dead writers of those files left. It returns the names it deleted.
func cleanGuestFiles(cache string) []string {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return nil
	}
	now := time.Now()
	stale := func(e os.DirEntry) bool {
		info, err := e.Info()
		return err == nil && info.Mode().IsRegular() && now.Sub(info.ModTime()) > recentUse
	}
	type record struct {
		name string
		used time.Time
		p    prepared
	}
	var recs []record
	var deleted []string
	remove := func(name string) {
		if os.Remove(filepath.Join(cache, name)) == nil {
			deleted = append(deleted, name)
		}
	}
	kept := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "prep-"):
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			var p prepared
			b, err := os.ReadFile(filepath.Join(cache, name))
			if err != nil || json.Unmarshal(b, &p) != nil {
				// Records are written whole (renamed into place): this
				// one is not ours to trust.
				remove(name)
				continue
			}
			recs = append(recs, record{name, info.ModTime(), p})
		case strings.HasPrefix(name, statePrefix) && strings.HasSuffix(name, ".json"):
			var sm stateMeta
			b, err := os.ReadFile(filepath.Join(cache, name))
			if err == nil && json.Unmarshal(b, &sm) == nil && sm.usable() {
				kept[sm.Machine.Kernel] = true
				kept[sm.Machine.Initrd] = true
			}
		case strings.HasPrefix(name, ".tmp-vmlinux-"), strings.HasPrefix(name, ".tmp-initramfs-"), strings.HasPrefix(name, ".tmp-prep-"):
			// writeCacheFile renames its file at once: an old one is a
			// dead writer's.
			if stale(e) {
				remove(name)
			}
		}
	}
	slices.SortFunc(recs, func(a, b record) int { return b.used.Compare(a.used) })
	for i, r := range recs {
		if i < keepRecords || now.Sub(r.used) <= recentUse {
			kept[r.p.Vmlinux] = true
			kept[r.p.Initrd] = true
			continue
		}
		remove(r.name)
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "vmlinux-") && !strings.HasPrefix(name, "initramfs-") {
			continue
		}
		// Not named by anything in use, nor just made or reused (a process
		// touches the file it finds before it writes the record that
		// names it).
		if !kept[filepath.Join(cache, name)] && stale(e) {
			remove(name)
		}
	}
	return deleted
}

// lockMirror opens the mirror dir under a shared lock, held by the returned
// file until it is closed, and marks it used. It fails with ErrNotExist
// when the directory is gone, or was deleted while the lock was awaited.
func lockMirror(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	// A clean-up holds the exclusive lock only while it moves the
	// directory away and deletes it: wait for it.
	if err := flock(f, syscall.LOCK_SH, false); err != nil {
		f.Close()
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Nlink == 0 {
		f.Close()
		return nil, fmt.Errorf("qemu: %s: %w", dir, os.ErrNotExist)
	}
	// Moved away (to be deleted) while the lock was awaited.
	if err := checkOwned(dir, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("qemu: %s: %w", dir, os.ErrNotExist)
	}
	var now syscall.Stat_t
	if syscall.Lstat(dir, &now) != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		f.Close()
		return nil, fmt.Errorf("qemu: %s: %w", dir, os.ErrNotExist)
	}
	touch(dir)
	return f, nil
}

// cleanMirrors deletes from the cache the mirrors no VM shares that were
// not used in the last recentUse or are beyond the keepMirrors most
// recently used (keep, just made, is kept), and what dead writers left. It
// returns the names it deleted.
func cleanMirrors(cache, keep string) []string {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return nil
	}
	now := time.Now()
	type mirror struct {
		name string
		used time.Time
	}
	var ms []mirror
	var deleted []string
	for _, e := range ents {
		name := e.Name()
		info, err := e.Info()
		if err != nil || !info.IsDir() {
			continue
		}
		switch {
		case strings.HasPrefix(name, mirrorGone):
			// A clean-up that died on its way.
			if now.Sub(info.ModTime()) > recentUse && os.RemoveAll(filepath.Join(cache, name)) == nil {
				deleted = append(deleted, name)
			}
		case strings.HasPrefix(name, ".tmp-files-"):
			// mirrorFiles renames its directory as soon as it is filled.
			if now.Sub(info.ModTime()) > recentUse && os.RemoveAll(filepath.Join(cache, name)) == nil {
				deleted = append(deleted, name)
			}
		case strings.HasPrefix(name, "files-") && name != keep:
			ms = append(ms, mirror{name, info.ModTime()})
		}
	}
	slices.SortFunc(ms, func(a, b mirror) int { return b.used.Compare(a.used) })
	for i, m := range ms {
		if i < keepMirrors-1 && now.Sub(m.used) <= recentUse {
			continue
		}
		if removeMirror(cache, m.name) {
			deleted = append(deleted, m.name)
		}
	}
	return deleted
}

// removeMirror deletes the mirror name if no VM shares it (its exclusive
// lock is free): moved away under the lock, so that no process finds it
// half deleted, then deleted.
func removeMirror(cache, name string) bool {
	dir := filepath.Join(cache, name)
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if flock(f, syscall.LOCK_EX, true) != nil {
		return false
	}
	gone, err := os.MkdirTemp(cache, mirrorGone)
	if err != nil {
		return false
	}
	dst := filepath.Join(gone, name)
	if err := os.Rename(dir, dst); err != nil {
		os.Remove(gone)
		return false
	}
	return os.RemoveAll(gone) == nil
}

// Locks of the cache (files that are never deleted), each taken by one
// process at a time for work that two processes would otherwise do twice:
// the second waits, then finds the work done.
const (
	// statesLock: the making of a saved state (a boot and a save: seconds).
	statesLock = "states.lock"
	// prepLock: the making of the guest's kernel and initramfs and the
	// measure of the TSC, on which the saved states' key depends (two
	// processes making them at once would make two keys).
	prepLock = "prep.lock"
)

// lockCache waits for the cache's lock name (or the end of ctx) and returns
// its release.
func lockCache(ctx context.Context, cache, name string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(cache, name), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("qemu: the cache's lock %s: %w", name, err)
	}
	for {
		err := flock(f, syscall.LOCK_EX, true)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("qemu: the cache's lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("qemu: the cache's lock %s: %w", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
