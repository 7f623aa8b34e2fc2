package qemu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestViewRefusesAnotherDirectory: the helper that mounts the ignore= filter
// for QEMU mounts it only over the very directory the filter serves: a
// directory replaced since (another inode under the path), or a path through
// a symbolic link, makes it exit with viewExit before any mount, naming the
// directory, and QEMU is not started.
func TestViewRefusesAnotherDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the helper makes a mount namespace: it runs as root")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		t.Fatal(err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	marker := filepath.Join(dir, "qemu-ran")
	for _, c := range []struct{ name, path, id, want string }{
		{"replaced", real, fmt.Sprintf("%d:%d", st.Dev, st.Ino+1), real + " is no longer the directory the filter serves"},
		{"through a link", link, fmt.Sprintf("%d:%d", st.Dev, st.Ino), link + ": too many levels of symbolic links"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("/proc/self/exe")
			cmd.Args = []string{viewMarker, "1", c.path, c.id, "3", "ro", "/bin/touch", marker}
			cmd.ExtraFiles = []*os.File{devNull}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != viewExit {
				t.Fatalf("the helper: %v (%s), want exit status %d", err, errb.String(), viewExit)
			}
			if !strings.Contains(errb.String(), c.want) {
				t.Errorf("the helper said %q, want %q", errb.String(), c.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the helper executed its command")
			}
		})
	}
}
