package landlock_test

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestSignalAndPtraceOutsideRefused: a process outside the sandbox (a child of the
// test) can be neither signalled nor traced (EPERM), while the program can signal
// its own children.
func TestSignalAndPtraceOutsideRefused(t *testing.T) {
	p := providertest.Require(t, "landlock")
	if !p.Capabilities().Has(pysandboxes.CapSignals) {
		t.Skip("Landlock ABI < 6: signals are not scoped")
	}
	victim := exec.Command("/bin/sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	pid := victim.Process.Pid
	sb := sandbox(t, []string{"expose-ro=/usr"})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
import ctypes, signal, subprocess
pid = int(sys.argv[1])
attempt("kill", lambda: os.kill(pid, signal.SIGTERM))
attempt("kill0", lambda: os.kill(pid, 0))
libc = ctypes.CDLL(None, use_errno=True)
def ptrace(req):
    if libc.ptrace(req, pid, None, None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return 0
attempt("ptrace-attach", lambda: ptrace(16))
attempt("ptrace-seize", lambda: ptrace(0x4206))
attempt("environ", lambda: open("/proc/%d/environ" % pid, "rb").read())
child = subprocess.Popen(["/usr/bin/sleep", "60"])
attempt("own-child", lambda: os.kill(child.pid, signal.SIGTERM))
child.wait()
`, strconv.Itoa(pid))
	providertest.ExpectLine(t, out, "kill EPERM")
	providertest.ExpectLine(t, out, "kill0 EPERM")
	providertest.ExpectLine(t, out, "ptrace-attach EPERM")
	providertest.ExpectLine(t, out, "ptrace-seize EPERM")
	providertest.ExpectLine(t, out, "environ EACCES")
	providertest.ExpectLine(t, out, "own-child OK None")
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process outside is gone: %v", err)
	}
}
