package unshare_test

import (
	"os"
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestExposeWholeRoot: expose-ro=/ shows the host's files read-only, but not its
// /run (an empty read-only directory unless a rule names it), its devices (the
// sandbox's own /dev) nor its processes (the sandbox's own /proc).
func TestExposeWholeRoot(t *testing.T) {
	if _, err := os.Stat("/etc/os-release"); err != nil {
		t.Skip("no /etc/os-release to read")
	}
	sb := sandbox(t, []string{"expose-ro=/"})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
attempt("os-release", lambda: len(open("/etc/os-release").read()) > 0)
attempt("run", lambda: os.listdir("/run"))
attempt("run-write", lambda: open("/run/x", "w"))
attempt("etc-write", lambda: open("/etc/x", "w"))
attempt("dev", lambda: "vda" in os.listdir("/dev") or "sda" in os.listdir("/dev"))
attempt("proc", lambda: max(int(p) for p in os.listdir("/proc") if p.isdigit()) < 100)
attempt("pid", lambda: os.getpid() < 100)
`)
	providertest.ExpectLine(t, out, "os-release OK True")
	providertest.ExpectLine(t, out, "run OK []")
	providertest.ExpectLine(t, out, "run-write EROFS")
	providertest.ExpectLine(t, out, "etc-write EROFS")
	providertest.ExpectLine(t, out, "dev OK False")
	providertest.ExpectLine(t, out, "pid OK True")
}
