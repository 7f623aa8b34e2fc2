package pysandboxes_test

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/proctest"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool { return proctest.Alive(pid) }

// waitGone waits until none of pids runs, failing the test after timeout.
func waitGone(t *testing.T, timeout time.Duration, pids ...int) {
	t.Helper()
	proctest.WaitGone(t, timeout, pids...)
}

// parsePids reads space-separated pids.
func parsePids(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid %q in %q", f, s)
		}
		out = append(out, n)
	}
	return out
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []int { return proctest.Children(pid) }

// openFDs counts the descriptors of the test process.
func openFDs(t *testing.T) int {
	t.Helper()
	n, err := proctest.OpenFDs()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
