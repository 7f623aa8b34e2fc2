package firejail_test

import (
	"strings"
	"testing"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestBadParamsRefused: firejail.<key>= lines that would change what the sandbox
// shows of the host, its network, environment or capabilities, weaken the
// seccomp filter, or that firejail does not know, are refused with the file and
// line of each, all together.
func TestBadParamsRefused(t *testing.T) {
	providertest.BadParamsRefused(t, providerName, []string{
		"firejail.whitelist=/etc",           // 2
		"firejail.noblacklist=/root",        // 3
		"firejail.net=eth0",                 // 4
		"firejail.env=A=B",                  // 5
		"firejail.caps.keep=sys_admin",      // 6
		"firejail.seccomp.drop=mount",       // 7
		"firejail.allow-debuggers=",         // 8
		"firejail.no-such-option=1",         // 9
		"firejail.rlimit-as=lots",           // 10
		"firejail.seccomp-error-action=log", // 11
		"firejail.nice=-5",                  // 12
		"firejail.private-tmp=maybe",        // 13
		"firejail.seccomp=mount;reboot",     // 14
	}, []string{"use expose-ro=, expose-rw= or ignore=", "the network is the policy's net= rules",
		"the environment is exactly the policy's env= rules", "holds no capability", "weaken the seccomp filter",
		"unknown firejail option --no-such-option", "is not a size", "log would let refused calls run",
		"is not a niceness", "takes no value", "is not a system call"})
}

// TestGoodParamsApplied: allowed firejail.<key>= lines reach firejail: a
// hostname, a resource limit, an extra system call refused by seccomp.
func TestGoodParamsApplied(t *testing.T) {
	sb := providertest.Sandbox(t, providerName, []string{"firejail.hostname=inside", "firejail.rlimit-nofile=77", "firejail.seccomp=chown"})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
import resource
attempt("hostname", lambda: socket.gethostname())
attempt("nofile", lambda: resource.getrlimit(resource.RLIMIT_NOFILE))
attempt("chown", lambda: os.chown("/", 0, 0))
`)
	providertest.ExpectLine(t, out, "hostname OK inside")
	providertest.ExpectLine(t, out, "nofile OK (77, 77)")
	providertest.ExpectLine(t, out, "chown EPERM")
}

// TestParamRaisingALimitRefused: a firejail.rlimit-*= above the sandbox's own
// limit (WithLimits) is refused, naming the line: firejail runs as root and
// could raise it.
func TestParamRaisingALimitRefused(t *testing.T) {
	sb := providertest.Sandbox(t, providerName, []string{"firejail.rlimit-nofile=4096"}, pysandboxes.WithLimits(pysandboxes.Limits{OpenFiles: 64}))
	_, err := providertest.Run(t, sb, "/bin/true")
	if err == nil || !strings.Contains(err.Error(), "<arg>: firejail.rlimit-nofile=4096: raises the sandbox's limit (64)") {
		t.Fatalf("got %v", err)
	}
}
