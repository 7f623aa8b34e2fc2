package security

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/pysandboxes/pysandboxes"
)

// The file system attacks. Each run's directory holds "outside/secret.txt" (the
// secret, never exposed) and the directories the policy exposes.

func (e *env) secretFile() string { return e.file(e.secret, "outside", "secret.txt") }

var readOutside = &Attack{
	Name: "read-outside", Capability: pysandboxes.CapFilesRead,
	Summary: "read a secret file, and list its directory, outside the exposed paths",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		e.file("visible", "exposed", "visible.txt")
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv: e.py(`
exposed, secret = sys.argv[1:3]
attempt("visible", lambda: read(exposed + "/visible.txt"))
attempt("secret", lambda: read(secret))
attempt("listing", lambda: sorted(os.listdir(os.path.dirname(secret))))
`, exposed, secret),
			check: probes(control("visible"), deny("secret", fsReadDenied...), deny("listing", fsReadDenied...)),
		}
	},
}

var writeOutside = &Attack{
	Name: "write-outside", Capability: pysandboxes.CapFilesWrite,
	Summary: "create a file and overwrite the secret file outside the expose-rw directory",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		rw := e.dir("rw")
		created := e.path("outside", "created.txt")
		return &plan{
			rules: []string{"expose-rw=" + rw},
			argv: e.py(`
rw, secret, created = sys.argv[1:4]
def write(p, mode):
    with open(p, mode) as f:
        return f.write("PWNED")
attempt("inside", lambda: write(rw + "/new.txt", "w"))
attempt("create", lambda: write(created, "x"))
attempt("overwrite", lambda: write(secret, "r+"))
`, rw, secret, created),
			check: probes(control("inside"), deny("create", fsWriteDenied...), deny("overwrite", fsWriteDenied...)),
			host: func() (bool, string) {
				var what []string
				if _, err := os.Lstat(created); err == nil {
					what = append(what, "outside/created.txt was created")
				}
				if b, _ := os.ReadFile(secret); string(b) != e.secret {
					what = append(what, "outside/secret.txt was changed")
				}
				return len(what) > 0, strings.Join(what, ", ")
			},
		}
	},
}

var writeRO = &Attack{
	Name: "write-ro", Capability: pysandboxes.CapFilesWrite,
	Summary: "create, append to and remove files in an expose-ro directory",
	setup: func(e *env) *plan {
		ro := e.dir("ro")
		existing := e.file("original", "ro", "file.txt")
		rw := e.dir("rw")
		return &plan{
			rules: []string{"expose-ro=" + ro, "expose-rw=" + rw},
			argv: e.py(`
ro, rw = sys.argv[1:3]
def write(p, mode):
    with open(p, mode) as f:
        return f.write("PWNED")
attempt("inside-rw", lambda: write(rw + "/new.txt", "w"))
attempt("create", lambda: write(ro + "/new.txt", "x"))
attempt("append", lambda: write(ro + "/file.txt", "a"))
attempt("remove", lambda: os.unlink(ro + "/file.txt"))
attempt("mkdir", lambda: os.mkdir(ro + "/sub"))
`, ro, rw),
			check: probes(control("inside-rw"), deny("create", fsWriteDenied...), deny("append", fsWriteDenied...),
				deny("remove", fsWriteDenied...), deny("mkdir", fsWriteDenied...)),
			host: func() (bool, string) {
				var what []string
				if b, err := os.ReadFile(existing); err != nil || string(b) != "original" {
					what = append(what, "ro/file.txt was changed or removed")
				}
				for _, n := range []string{"new.txt", "sub"} {
					if _, err := os.Lstat(filepath.Join(ro, n)); err == nil {
						what = append(what, "ro/"+n+" was created")
					}
				}
				return len(what) > 0, strings.Join(what, ", ")
			},
		}
	},
}

var writeTmp = &Attack{
	Name: "write-tmp", Capability: pysandboxes.CapFilesWrite,
	Summary: "write a file in /tmp without any expose-rw rule (no implicit /tmp)",
	setup: func(e *env) *plan {
		target := filepath.Join("/tmp", tempPrefix+"tmp-"+e.mark) // the system's, whatever TMPDIR says
		e.cleanup(func() { os.Remove(target) })
		return &plan{
			argv: e.py(`
def write(p):
    with open(p, "x") as f:
        return f.write("PWNED")
attempt("tmp", lambda: write(sys.argv[1]))
`, target),
			check: probes(deny("tmp", fsWriteDenied...)),
			host: func() (bool, string) {
				_, err := os.Lstat(target)
				if err != nil {
					return false, target + " was not created on the host"
				}
				return true, target + " was created"
			},
			// A /tmp of the sandbox's own (a VM's) takes the file: the host's
			// /tmp is the target.
			sinkDecides: true,
		}
	},
}

var symlinkPlanted = &Attack{
	Name: "symlink-planted", Capability: pysandboxes.CapFilesRead,
	Summary: "read through symbolic links planted in an exposed directory that point outside (to the file, to its directory)",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		e.fail(os.Symlink(secret, filepath.Join(exposed, "planted")))
		e.fail(os.Symlink(filepath.Dir(secret), filepath.Join(exposed, "planted-dir")))
		e.fail(os.Symlink("../outside/secret.txt", filepath.Join(exposed, "planted-rel")))
		e.file("visible", "exposed", "visible.txt")
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv: e.py(`
d = sys.argv[1]
attempt("visible", lambda: read(d + "/visible.txt"))
attempt("file", lambda: read(d + "/planted"))
attempt("dir", lambda: read(d + "/planted-dir/secret.txt"))
attempt("relative", lambda: read(d + "/planted-rel"))
`, exposed),
			check: probes(control("visible"), deny("file", fsReadDenied...), deny("dir", fsReadDenied...), deny("relative", fsReadDenied...)),
		}
	},
}

var symlinkOwn = &Attack{
	Name: "symlink-own", Capability: pysandboxes.CapFilesRead,
	Summary: "make symbolic links to the secret inside an expose-rw directory, then read through them",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		rw := e.dir("rw")
		return &plan{
			rules: []string{"expose-rw=" + rw},
			argv: e.py(`
rw, secret = sys.argv[1:3]
for name, target in (("abs", secret), ("rel", "../outside/secret.txt")):
    try:
        os.symlink(target, rw + "/" + name)
    except OSError as e:
        print("made-" + name, errno.errorcode.get(e.errno))
attempt("absolute", lambda: read(rw + "/abs"))
attempt("relative", lambda: read(rw + "/rel"))
`, rw, secret),
			check: probes(deny("absolute", fsReadDenied...), deny("relative", fsReadDenied...)),
		}
	},
}

var hardlinkOwn = &Attack{
	Name: "hardlink-own", Capability: pysandboxes.CapFilesRead,
	Summary: "make a hard link to the secret inside an expose-rw directory, then read it",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		rw := e.dir("rw")
		return &plan{
			rules: []string{"expose-rw=" + rw},
			argv: e.py(`
rw, secret = sys.argv[1:3]
attempt("link", lambda: os.link(secret, rw + "/hard"))
attempt("read", lambda: read(rw + "/hard"))
`, rw, secret),
			check: probes(deny("link", "EXDEV", "EACCES", "EPERM", "ENOENT"), deny("read", "ENOENT", "EACCES")),
		}
	},
}

var hardlinkPlanted = &Attack{
	Name: "hardlink-planted", Capability: pysandboxes.CapFilesRead,
	Summary: "read a hard link to the secret that the host planted in an exposed directory",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		e.fail(os.Link(secret, filepath.Join(exposed, "hard")))
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			argv:  e.py(`attempt("read", lambda: read(sys.argv[1] + "/hard"))`, exposed),
			check: probes(deny("read", fsReadDenied...)),
		}
	},
}

var chdirUp = &Attack{
	Name: "chdir-dotdot", Capability: pysandboxes.CapFilesRead,
	Summary: `chdir("..") out of the exposed working directory, then read the secret by a relative path`,
	setup: func(e *env) *plan {
		e.secretFile()
		exposed := e.dir("exposed")
		return &plan{
			rules: []string{"expose-ro=" + exposed},
			dir:   exposed,
			argv: e.py(`
try:
    os.chdir("..")
except OSError as e:
    print("chdir", errno.errorcode.get(e.errno))
attempt("read", lambda: read("outside/secret.txt"))
attempt("listing", lambda: sorted(os.listdir(".")))
`),
			check: probes(deny("read", fsReadDenied...), probe{label: "listing", deny: fsReadDenied, masked: onlyOnTheWay}),
		}
	},
}

// onlyOnTheWay reports whether the listing of the run's directory shows nothing
// but the name of the exposed directory in it: a root built from the policy
// (firejail's whitelist) holds the directories on the way to an exposed path,
// and only them. The host's directory, with "outside", is not what was listed.
func onlyOnTheWay(rest string) bool { return rest == "['exposed']" || rest == "[]" }

var procSelfRoot = &Attack{
	Name: "proc-self-root", Capability: pysandboxes.CapFilesRead,
	Summary: "read the secret through /proc/self/root and /proc/self/cwd (with /proc exposed)",
	setup: func(e *env) *plan {
		secret := e.secretFile()
		exposed := e.dir("exposed")
		return &plan{
			rules: []string{"expose-ro=" + exposed, "expose-ro=/proc"},
			dir:   exposed,
			argv: e.py(`
attempt("status", lambda: read("/proc/self/status")[:5])
attempt("root", lambda: read("/proc/self/root" + sys.argv[1]))
attempt("cwd", lambda: read("/proc/self/cwd/../outside/secret.txt"))
`, secret),
			check: probes(control("status"), deny("root", fsReadDenied...), deny("cwd", fsReadDenied...)),
		}
	},
}

var ignoredFile = &Attack{
	Name: "ignored-file", Capability: pysandboxes.CapHide,
	Summary: "read an ignore=d file of an exposed directory (its sibling stays readable)",
	setup: func(e *env) *plan {
		exposed := e.dir("project")
		e.file(e.secret, "project", ".env")
		e.file("visible", "project", "app.txt")
		return &plan{
			rules: []string{"expose-ro=" + exposed, "ignore=.env"},
			argv: e.py(`
d = sys.argv[1]
attempt("sibling", lambda: read(d + "/app.txt"))
attempt("ignored", lambda: read(d + "/.env"))
`, exposed),
			check: probes(control("sibling"), probe{label: "ignored", deny: []string{"EACCES", "ENOENT", "EPERM"},
				masked: func(rest string) bool { return rest == "''" }}),
		}
	},
}

var envSecret = &Attack{
	Name: "env-secret", Capability: pysandboxes.CapEnv,
	Summary: "read a secret variable of the host's environment, or any variable the policy does not grant",
	setup: func(e *env) *plan {
		name := "PYSB_SECURITY_SECRET_" + strings.ToUpper(e.mark)
		e.fail(os.Setenv(name, e.secret))
		e.cleanup(func() { os.Unsetenv(name) })
		return &plan{
			rules: []string{"env=PYSB_VISIBLE=visible"},
			argv: e.py(`
name = sys.argv[1]
print("visible", "OK" if os.environ.get("PYSB_VISIBLE") == "visible" else "MISSING")
print("secret", "OK " + os.environ[name] if name in os.environ else "MISSING")
extra = sorted(set(os.environ) - {"PYSB_VISIBLE", "PYSB_MARK", "LC_CTYPE"})
print("extra", "OK %r" % extra if extra else "NONE")
`, name),
			check: probes(control("visible"), deny("secret", "MISSING"), deny("extra", "NONE")),
		}
	},
}

// fileAttacks are the file system and environment attacks.
var fileAttacks = []*Attack{readOutside, writeOutside, writeRO, writeTmp, symlinkPlanted, symlinkOwn, hardlinkOwn,
	hardlinkPlanted, chdirUp, procSelfRoot, ignoredFile, envSecret}
