package security

import (
	"os"
	"path/filepath"

	"github.com/pysandboxes/pysandboxes"
	"golang.org/x/sys/unix"
)

// The attacks on ignore=: an ignored path must look absent through every door
// (contents, names in listings, metadata, link targets, extended attributes),
// for the whole life of the sandbox, including files the host creates there, or
// renames onto an ignored name, after the program started.

// hideProbes is the program of the hide attacks: every door on each path of
// sys.argv[3:] (the listing of their directories included), once the host said
// go.
const hideProbes = waitGo + `
import stat as _st
ready, go = sys.argv[1:3]
wait_go(ready, go)
def readlink_or_read(p):
    if os.path.islink(p):
        return os.readlink(p)
    if os.path.isdir(p):
        return os.listdir(p)
    return read(p)
for i, p in enumerate(sys.argv[3:]):
    attempt("read%d" % i, lambda: readlink_or_read(p))
    attempt("stat%d" % i, lambda: _st.filemode(os.lstat(p).st_mode) + " %d" % os.lstat(p).st_size)
    attempt("xattr%d" % i, lambda: os.listxattr(p, follow_symlinks=False))
    def listed(p=p):
        if os.path.basename(p) in os.listdir(os.path.dirname(p)):
            return "listed"
        raise FileNotFoundError(errno.ENOENT, "not listed")
    attempt("listed%d" % i, listed)
`

// hideChecks are the probes of hideProbes for n paths.
func hideChecks(n int) []probe {
	var ps []probe
	for i := 0; i < n; i++ {
		for _, door := range []string{"read", "stat", "xattr", "listed"} {
			ps = append(ps, deny(door+itoa(i), metaDenied...))
		}
	}
	return ps
}

var ignoredMeta = &Attack{
	Name: "ignored-meta", Capability: pysandboxes.CapHide,
	Summary: "stat, list, read the link and the extended attributes of ignore=d paths (a file, a directory, a link)",
	setup: func(e *env) *plan {
		project := e.dir("project")
		rw := e.dir("rw")
		env := e.file(e.secret, "project", ".env")
		e.file(e.secret, "project", "secrets", "key.pem")
		link := e.path("project", "id.key")
		e.fail(os.Symlink("/nonexistent/"+e.secret, link))
		if err := unix.Setxattr(env, "user.pysb", []byte(e.secret), 0); err != nil {
			e.skipf("the host's file system takes no user.* extended attribute here: %v", err)
		}
		return &plan{
			rules: []string{"expose-ro=" + project, "expose-rw=" + rw, "ignore=.env", "ignore=secrets", "ignore=*.key"},
			argv: e.py(hideProbes, filepath.Join(rw, "ready"), filepath.Join(rw, "go"),
				env, filepath.Join(project, "secrets"), filepath.Join(project, "secrets", "key.pem"), link),
			check: probes(hideChecks(4)...),
			during: func() {
				hostWait(filepath.Join(rw, "ready"))
				os.WriteFile(filepath.Join(rw, "go"), nil, 0o644)
			},
		}
	},
}

var ignoredLater = &Attack{
	Name: "ignored-later", Capability: pysandboxes.CapHide,
	Summary: "read ignore=d files the host creates after the program started (.env, app.log, a log in a subdirectory)",
	setup: func(e *env) *plan {
		project := e.dir("project")
		e.dir("project", "sub")
		e.file("visible", "project", "app.py")
		rw := e.dir("rw")
		later := []string{filepath.Join(project, ".env"), filepath.Join(project, "app.log"), filepath.Join(project, "sub", "x.log")}
		return &plan{
			rules: []string{"expose-ro=" + project, "expose-rw=" + rw, "ignore=.env", "ignore=*.log"},
			argv:  e.py(hideProbes, append([]string{filepath.Join(rw, "ready"), filepath.Join(rw, "go")}, later...)...),
			check: probes(hideChecks(len(later))...),
			during: func() {
				hostWait(filepath.Join(rw, "ready"))
				for _, p := range later {
					os.WriteFile(p, []byte(e.secret), 0o644)
				}
				os.WriteFile(filepath.Join(rw, "go"), nil, 0o644)
			},
		}
	},
}

var ignoredRenamed = &Attack{
	Name: "ignored-renamed", Capability: pysandboxes.CapHide,
	Summary: "read an ignore=d file that the host replaced by rename after the program started (how editors and sed -i save)",
	setup: func(e *env) *plan {
		project := e.dir("project")
		env := e.file("old", "project", ".env")
		log := e.file("old", "project", "app.log")
		rw := e.dir("rw")
		return &plan{
			rules: []string{"expose-rw=" + project, "expose-rw=" + rw, "ignore=.env", "ignore=*.log"},
			argv:  e.py(hideProbes, filepath.Join(rw, "ready"), filepath.Join(rw, "go"), env, log),
			check: probes(hideChecks(2)...),
			during: func() {
				hostWait(filepath.Join(rw, "ready"))
				for _, p := range []string{env, log} {
					tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
					os.WriteFile(tmp, []byte(e.secret), 0o644)
					os.Rename(tmp, p)
				}
				os.WriteFile(filepath.Join(rw, "go"), nil, 0o644)
			},
		}
	},
}

// hideAttacks are the attacks on ignore= over time and through every door.
var hideAttacks = []*Attack{ignoredMeta, ignoredLater, ignoredRenamed}
