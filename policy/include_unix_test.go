//go:build unix

package policy

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestIncludeFIFO checks that an include naming a FIFO is an error at once, not a
// load that waits forever for a writer.
func TestIncludeFIFO(t *testing.T) {
	e := newCoreEnv(t)
	if err := syscall.Mkfifo(e.path("fifo"), 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	e.write(".py-sandboxes", "env=A=1\ninclude \"fifo\"")
	var err error
	withTimeout(t, 5*time.Second, func() { _, err = e.load(".py-sandboxes") })
	want := []string{".py-sandboxes(2): cannot read included file 'fifo': not a regular file"}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	// The main file, named by the caller, may be a pipe ("check /dev/stdin").
	go func() {
		f, err := os.OpenFile(e.path("fifo"), os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString("env=FROM_PIPE=1\n")
	}()
	var p *Policy
	withTimeout(t, 5*time.Second, func() { p, err = e.load("fifo") })
	if err != nil {
		t.Fatalf("Load(fifo) = %v", err)
	}
	if diff := cmp.Diff([]string{"FROM_PIPE=1"}, p.Environ()); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
}

// TestIncludeDevice checks that a character device is refused (reading /dev/zero
// would never end).
func TestIncludeDevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	e := newCoreEnv(t)
	var err error
	withTimeout(t, 5*time.Second, func() { _, err = e.parse("include \"/dev/zero\"") })
	want := []string{".py-sandboxes(1): cannot read included file '/dev/zero': not a regular file"}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestIncludeUnreadable checks an existing file without read permission. Root reads
// any file, so the test is skipped then (TestIncludeErrors and TestIncludeFIFO cover
// the other kinds of unreadable includes).
func TestIncludeUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: a mode 000 file is still readable (directories and FIFOs cover unreadable includes)")
	}
	e := newCoreEnv(t)
	p := e.write("secret", "env=A=1")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err := e.parse("include \"secret\"")
	want := []string{".py-sandboxes(1): cannot read included file 'secret': permission denied"}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
