package hidefs

import (
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestHiddenNamesAbsent(t *testing.T) {
	host := tree(t, map[string]string{
		"a.txt":               "A",
		".env":                "SECRET",
		"logs/keep.txt":       "K",
		"logs/x.log":          "SECRET",
		"secrets/in.txt":      "SECRET",
		"sub/.env":            "SECRET",
		"sub/abs.txt":         "SECRET",
		"sub/other.txt":       "O",
		"to-env":              "->.env",
		"to-secret-dir":       "->secrets/in.txt",
		"x.log":               "->a.txt", // a hidden symbolic link
		".go-fuse-epoll-hack": "RESERVED",
	})
	if err := unix.Setxattr(host+"/.env", "user.k", []byte("v"), 0); err != nil {
		t.Logf("no user xattrs on the host file system: %v", err)
	}
	m := startMount(t, host, Options{Filter: ignores(host, ".env", "*.log", "secrets", host+"/sub/abs.txt")}, mountOpts{})

	for _, rel := range []string{".env", "logs/x.log", "secrets", "secrets/in.txt", "sub/.env", "sub/abs.txt", "x.log", ".go-fuse-epoll-hack"} {
		_, err := os.Lstat(m.p(rel))
		wantErrno(t, "lstat "+rel, err, unix.ENOENT)
		_, err = os.ReadFile(m.p(rel))
		wantErrno(t, "read "+rel, err, unix.ENOENT)
		_, err = os.Readlink(m.p(rel))
		wantErrno(t, "readlink "+rel, err, unix.ENOENT)
		_, err = unix.Getxattr(m.p(rel), "user.k", make([]byte, 16))
		wantErrno(t, "getxattr "+rel, err, unix.ENOENT)
		wantErrno(t, "access "+rel, unix.Access(m.p(rel), unix.F_OK), unix.ENOENT)
		_, err = unix.Open(m.p(rel), unix.O_PATH|unix.O_NOFOLLOW, 0)
		wantErrno(t, "open O_PATH "+rel, err, unix.ENOENT)
	}
	// A visible symbolic link to a hidden name leads nowhere.
	_, err := os.ReadFile(m.p("to-env"))
	wantErrno(t, "read through a link to .env", err, unix.ENOENT)
	_, err = os.ReadFile(m.p("to-secret-dir"))
	wantErrno(t, "read through a link into secrets/", err, unix.ENOENT)
	if l, err := os.Readlink(m.p("to-env")); err != nil || l != ".env" {
		t.Errorf("readlink to-env = %q, %v: want the link's own text", l, err)
	}

	if got, want := names(t, m.dir), []string{"a.txt", "logs", "sub", "to-env", "to-secret-dir"}; !slices.Equal(got, want) {
		t.Errorf("root lists %v, want %v", got, want)
	}
	if got, want := names(t, m.p("logs")), []string{"keep.txt"}; !slices.Equal(got, want) {
		t.Errorf("logs lists %v, want %v", got, want)
	}
	if got, want := names(t, m.p("sub")), []string{"other.txt"}; !slices.Equal(got, want) {
		t.Errorf("sub lists %v, want %v", got, want)
	}
	for rel, want := range map[string]string{"a.txt": "A", "logs/keep.txt": "K", "sub/other.txt": "O"} {
		if b, err := os.ReadFile(m.p(rel)); err != nil || string(b) != want {
			t.Errorf("read %s = %q, %v; want %q", rel, b, err, want)
		}
	}
}

// A mount point below the served directory is another file system: the
// server does not cross into it (a /proc or a host directory bound there
// would otherwise be served with the server's identity).
func TestNoMountCrossing(t *testing.T) {
	host := tree(t, map[string]string{"a.txt": "A", "mnt/under.txt": "COVERED"})
	outside := tree(t, map[string]string{"secret": "OUTSIDE"})
	// This bind mount is made in the test's own mount namespace, where the
	// server resolves names, and removed at cleanup.
	if err := unix.Mount(outside, host+"/mnt", "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(host+"/mnt", unix.MNT_DETACH) })
	m := startMount(t, host, Options{}, mountOpts{})
	_, err := os.Stat(m.p("mnt"))
	wantErrno(t, "stat the mount point", err, unix.EACCES)
	_, err = os.ReadFile(m.p("mnt/secret"))
	wantErrno(t, "read through the mount point", err, unix.EACCES)
	if b, err := os.ReadFile(m.p("a.txt")); err != nil || string(b) != "A" {
		t.Errorf("read a.txt = %q, %v", b, err)
	}
}
