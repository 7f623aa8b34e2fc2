package pysandboxes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes"
)

func TestSubprocessResourceLimits(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t, pysandboxes.WithLimits(pysandboxes.Limits{
		OpenFiles:    64,
		AddressSpace: 512 << 20,
		FileSize:     1000,
	}))
	out, err := sb.Command(ctx, "/bin/sh", "-c", "ulimit -n; ulimit -v; ulimit -Hn").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(out)), []string{"64", "524288", "64"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("limits seen inside = %v, want %v", got, want)
	}
	// Writing past RLIMIT_FSIZE raises SIGXFSZ.
	f := filepath.Join(t.TempDir(), "big")
	err = sb.Command(ctx, "/bin/sh", "-c", "exec head -c 5000 /dev/zero > "+f).Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.Status.Signal() != syscall.SIGXFSZ {
		t.Errorf("writing past the file size limit: %v, want killed by SIGXFSZ", err)
	}
	if st, err := os.Stat(f); err != nil || st.Size() != 1000 {
		t.Errorf("file size = %v (%v), want 1000", st, err)
	}
}

// An address-space limit makes a large allocation fail cleanly inside, while the
// supervisor (whose runtime maps far more than the limit) keeps working.
func TestSubprocessAddressSpaceLimit(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t, pysandboxes.WithLimits(pysandboxes.Limits{AddressSpace: 256 << 20}))
	for i := 0; i < 5; i++ {
		cmd := sb.Command(ctx, "/usr/bin/python3", "-c", "bytearray(10**9)")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *pysandboxes.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "MemoryError") {
			t.Fatalf("run %d: %v, stderr %q; want exit 1 with a MemoryError", i, err, stderr.String())
		}
	}
}

func TestSubprocessCPULimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sb := newSandbox(ctx, t, pysandboxes.WithLimits(pysandboxes.Limits{CPUTime: time.Second}))
	err := sb.Command(ctx, "/bin/sh", "-c", "while :; do :; done").Run()
	var ee *pysandboxes.ExitError
	if !errors.As(err, &ee) || ee.Status.Signal() != syscall.SIGXCPU {
		t.Fatalf("CPU spin: %v, want killed by SIGXCPU", err)
	}
	if ee.Err != nil {
		t.Errorf("Err = %v: the kernel ended it, not the context", ee.Err)
	}
}

func TestSubprocessOutputLimit(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(ctx, t, pysandboxes.WithLimits(pysandboxes.Limits{Output: 10000}))
	cmd := sb.Command(ctx, "/bin/sh", "-c", "yes 2>&1; sleep 1000")
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	err := cmd.Run()
	if !errors.Is(err, pysandboxes.ErrOutputLimit) {
		t.Fatalf("Run = %v, want ErrOutputLimit", err)
	}
	if out.Len() != 10000 {
		t.Errorf("kept %d bytes, want exactly the limit 10000", out.Len())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the tree took %v to die", d)
	}
	// Through StdoutPipe too.
	cmd = sb.Command(ctx, "/usr/bin/yes")
	r, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	got.ReadFrom(r)
	if err := cmd.Wait(); !errors.Is(err, pysandboxes.ErrOutputLimit) || got.Len() != 10000 {
		t.Errorf("pipe: Wait = %v after %d bytes, want ErrOutputLimit after 10000", err, got.Len())
	}
}
