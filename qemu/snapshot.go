package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// Saved states live in the provider's cache directory as state-<key> (about
// 70 MB each), with state-<key>.json saying what machine and which files
// (QEMU, kernel, initramfs, with their identities) the state was made of.
//
// Processes share them under flock(2) locks:
//   - a state is written to a temporary file locked exclusively, renamed to
//     its name, described (the .json), then unlocked;
//   - a process restoring a state holds a shared lock on it from its opening
//     until QEMU has read it (QEMU's descriptor shares the lock);
//   - the clean-up (after a state is made) deletes only what it can lock
//     exclusively without waiting: never a state being restored or written.
//
// A state is deleted when no current key can use it (its QEMU binary, kernel
// or initramfs is gone or changed), and beyond the newest maxStates (and
// maxStateBytes), by last use.
const (
	maxStates     = 4
	maxStateBytes = 512 << 20
	statePrefix   = "state-"
	stateTmp      = ".tmp-state-"
)

// stateKey names the saved state of a machine: its configuration and the
// identity of the QEMU binary, the kernel and the initramfs.
func stateKey(m *machine) (string, error) {
	ids, err := identities(m)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	b, _ := json.Marshal(m)
	h.Write(b)
	for _, id := range ids {
		fmt.Fprintf(h, "\x00%s", id)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// identities are the identities of the machine's files (path, device, inode,
// size, modification time).
func identities(m *machine) ([]string, error) {
	var ids []string
	for _, p := range []string{m.QEMU, m.Kernel, m.Initrd} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return nil, err
		}
		ids = append(ids, fmt.Sprintf("%s %d %d %d %d", p, st.Dev, st.Ino, st.Size, st.Mtim.Nano()))
	}
	return ids, nil
}

// stateMeta describes a saved state (state-<key>.json).
type stateMeta struct {
	Machine *machine `json:"machine"`
	Files   []string `json:"files"`
}

// usable reports whether the state can still be restored: its files are the
// ones it was made of.
func (sm *stateMeta) usable() bool {
	if sm.Machine == nil {
		return false
	}
	ids, err := identities(sm.Machine)
	return err == nil && slices.Equal(ids, sm.Files)
}

// flock takes a lock on f; nb: fail at once (EWOULDBLOCK) instead of waiting.
func flock(f *os.File, how int, nb bool) error {
	if nb {
		how |= syscall.LOCK_NB
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// openState opens the saved state at path for a restore, under a shared
// lock (kept by the descriptor QEMU inherits until it has read the state),
// and marks it used.
func openState(ctx context.Context, path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("qemu: the saved state: %w", err)
	}
	for {
		err := flock(f, syscall.LOCK_SH, true)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("qemu: locking the saved state: %w", err)
		}
		// Its writer is describing it: a moment.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("qemu: locking the saved state: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	now := time.Now()
	os.Chtimes(path, now, now)
	return f, nil
}

// saveState boots the machine to the guest's hello (before any share is
// mounted: QEMU refuses to save a VM whose 9p shares are mounted) and saves
// its state to path, then cleans the cache of states no longer of use.
func saveState(ctx context.Context, m *machine, empty, path string) error {
	ids, err := identities(m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), stateTmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := flock(tmp, syscall.LOCK_EX, true); err != nil {
		return fmt.Errorf("qemu: locking the new saved state: %w", err)
	}
	if err := migrateTo(ctx, m, empty, tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	meta, _ := json.Marshal(&stateMeta{Machine: m, Files: ids})
	if err := writeCacheFile(path+".json", meta); err != nil {
		os.Remove(path)
		return err
	}
	flock(tmp, syscall.LOCK_UN, false)
	cleanStates(filepath.Dir(path), filepath.Base(path))
	return nil
}

// migrateTo boots the machine and writes its state to f once the guest has
// said hello.
func migrateTo(ctx context.Context, m *machine, empty string, f *os.File) error {
	// A machine with a network device is saved with it (and its netdev, which
	// the key holds), outside any network namespace: the guest's network is
	// not configured before the state is taken, so nothing is sent.
	v, err := startVM(m, vmConfig{empty: empty, netdev: m.Netdev}, nil, nil)
	if err != nil {
		return err
	}
	defer func() {
		v.kill()
		v.wait()
	}()
	if err := v.waitHello(ctx); err != nil {
		return err
	}
	// QEMU takes the state file by name, passed over the monitor.
	if err := v.mon.sendFD("state", f); err != nil {
		return fmt.Errorf("qemu: saving the VM state: %w", err)
	}
	if _, err := v.mon.do("migrate", map[string]any{"uri": "fd:state"}); err != nil {
		return fmt.Errorf("qemu: saving the VM state: %w", err)
	}
	for {
		r, err := v.mon.do("query-migrate", nil)
		if err != nil {
			return fmt.Errorf("qemu: saving the VM state: %w", err)
		}
		var st struct {
			Status string `json:"status"`
			Error  string `json:"error-desc"`
		}
		json.Unmarshal(r, &st)
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("qemu: saving the VM state: %s %s", st.Status, st.Error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("qemu: saving the VM state: %w", ctx.Err())
		case <-v.dead:
			return v.why()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cleanStates deletes from the cache dir the saved states no current key can
// use, the oldest beyond maxStates and maxStateBytes (keep, just made, is
// kept), and what dead writers left; never a file another process has
// locked. It returns the names it deleted.
func cleanStates(dir, keep string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type state struct {
		name string
		used time.Time
		size int64
	}
	var live []state
	var deleted []string
	remove := func(name string) bool {
		if tryRemoveLocked(filepath.Join(dir, name)) {
			os.Remove(filepath.Join(dir, name+".json"))
			deleted = append(deleted, name)
			return true
		}
		return false
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, stateTmp):
			// A writer holds its temporary file locked: one that is not
			// locked is a dead writer's.
			if tryRemoveLocked(filepath.Join(dir, name)) {
				deleted = append(deleted, name)
			}
		case strings.HasPrefix(name, statePrefix) && strings.HasSuffix(name, ".json"):
			if _, err := os.Lstat(filepath.Join(dir, strings.TrimSuffix(name, ".json"))); errors.Is(err, os.ErrNotExist) {
				os.Remove(filepath.Join(dir, name)) // its state is gone
			}
		case strings.HasPrefix(name, statePrefix):
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			if name == keep {
				live = append(live, state{name, time.Now(), info.Size()})
				continue
			}
			var sm stateMeta
			b, err := os.ReadFile(filepath.Join(dir, name+".json"))
			if err != nil || json.Unmarshal(b, &sm) != nil || !sm.usable() {
				remove(name)
				continue
			}
			live = append(live, state{name, info.ModTime(), info.Size()})
		}
	}
	// The most recently used first: keep what fits.
	slices.SortFunc(live, func(a, b state) int { return b.used.Compare(a.used) })
	var total int64
	for i, s := range live {
		total += s.size
		if s.name != keep && (i >= maxStates || total > maxStateBytes) {
			if remove(s.name) {
				total -= s.size
			}
		}
	}
	return deleted
}

// tryRemoveLocked deletes path if it can take its exclusive lock without
// waiting (no process restores or writes it), and says whether it did. A
// process that opened it just before still reads it whole: the file lives
// on until its last descriptor closes.
func tryRemoveLocked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if flock(f, syscall.LOCK_EX, true) != nil {
		return false
	}
	return os.Remove(path) == nil
}
