package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// stateKey names the saved state of a machine: its configuration and the
// identity of the QEMU binary, the kernel and the initramfs (both named by
// their contents' hashes).
func stateKey(m *machine) (string, error) {
	h := sha256.New()
	b, _ := json.Marshal(m)
	h.Write(b)
	for _, p := range []string{m.QEMU, m.Kernel, m.Initrd} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "\x00%s %d %d %d %d", p, st.Dev, st.Ino, st.Size, st.Mtim.Nano())
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// saveState boots the machine to the guest's hello (before any share is
// mounted: QEMU refuses to save a VM whose 9p shares are mounted) and saves
// its state to path.
func saveState(ctx context.Context, m *machine, empty, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-state-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	// A machine with a network device is saved with it (and its netdev, which
	// the key holds), outside any network namespace: the guest's network is
	// not configured before the state is taken, so nothing is sent.
	v, err := startVM(m.QEMU, m.args(nil, empty, false, m.Netdev), nil, nil)
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
	if err := v.mon.sendFD("state", tmp); err != nil {
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
			if err := tmp.Sync(); err != nil {
				return err
			}
			if err := os.Chmod(tmp.Name(), 0o644); err != nil {
				return err
			}
			return os.Rename(tmp.Name(), path)
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
