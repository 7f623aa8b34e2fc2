package bwrap_test

import (
	"testing"

	"github.com/pysandboxes/pysandboxes/internal/providertest"
)

// TestBadParamsRefused: bwrap.<opt>= lines that would show host paths, change the
// environment, the network, the capabilities, take a descriptor, or that bwrap
// does not know, are refused with the file and line of each, all together.
func TestBadParamsRefused(t *testing.T) {
	providertest.BadParamsRefused(t, providerName, []string{
		"bwrap.bind=/ /",               // 2
		"bwrap.ro-bind=/etc /etc",      // 3
		"bwrap.share-net=yes",          // 4
		"bwrap.setenv=A B",             // 5
		"bwrap.cap-add=ALL",            // 6
		"bwrap.seccomp=3",              // 7
		"bwrap.no-such-option=1",       // 8
		"bwrap.tmpfs=relative",         // 9
		"bwrap.tmpfs=/proc/x",          // 10
		"bwrap.symlink=onlyone",        // 11
		"bwrap.perms=0700",             // 12 (nothing follows)
		"bwrap.chmod=0777 /etc/passwd", // 13
		"bwrap.new-session=maybe",      // 14
	}, []string{"use expose-ro= or expose-rw=", "the network is the policy's net= rules",
		"the environment is exactly the policy's env= rules", "holds no capability", "takes a descriptor",
		"unknown bwrap option --no-such-option", "not a clean absolute path", "belongs to the sandbox's own /proc",
		"takes 2 values", "applies to the next option", "changes the mode of a host file", "takes no value"})
}

// TestGoodParamsApplied: allowed bwrap.<opt>= lines reach bwrap, in order.
func TestGoodParamsApplied(t *testing.T) {
	sb := providertest.Sandbox(t, providerName, []string{"bwrap.hostname=inside", "bwrap.perms=0700", "bwrap.tmpfs=/scratch",
		"bwrap.symlink=/scratch /alias", "bwrap.new-session="})
	out := providertest.Py(t, sb, providertest.TryPrelude+`
attempt("hostname", lambda: socket.gethostname())
attempt("scratch", lambda: oct(os.stat("/scratch").st_mode & 0o777))
attempt("link", lambda: os.readlink("/alias"))
attempt("sid", lambda: os.getsid(0))
`)
	providertest.ExpectLine(t, out, "hostname OK inside")
	providertest.ExpectLine(t, out, "scratch OK 0o700")
	providertest.ExpectLine(t, out, "link OK /scratch")
	providertest.ExpectLine(t, out, "sid OK 1") // a session of the sandbox (0: one of the host)
}
