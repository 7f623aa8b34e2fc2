package hidefs

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The host changes the tree after the mount is made: hiding follows names.
func TestHostChangesAfterStart(t *testing.T) {
	host := tree(t, map[string]string{
		"a.txt":      "A",
		".env":       "OLD-SECRET",
		"b.txt":      "B",
		"dir/f.txt":  "F",
		"dir2/g.txt": "G",
		"sub/":       "",
	})
	outside := t.TempDir()
	// Attributes are not cached: a stale node's stat is asked of the server.
	m := startMount(t, host, Options{Filter: ignores(host, ".env", "*.log", "secrets"), AttrTimeout: -1}, mountOpts{})

	t.Run("created later under a hidden name", func(t *testing.T) {
		os.WriteFile(m.h("sub/.env"), []byte("NEW-SECRET"), 0o644)
		os.WriteFile(m.h("sub/new.log"), []byte("LOG"), 0o644)
		os.WriteFile(m.h("sub/new.txt"), []byte("N"), 0o644)
		for _, rel := range []string{"sub/.env", "sub/new.log"} {
			_, err := os.ReadFile(m.p(rel))
			wantErrno(t, "read "+rel, err, unix.ENOENT)
			_, err = os.Lstat(m.p(rel))
			wantErrno(t, "lstat "+rel, err, unix.ENOENT)
		}
		if got := names(t, m.p("sub")); !slices.Equal(got, []string{"new.txt"}) {
			t.Errorf("sub lists %v, want [new.txt]", got)
		}
	})

	t.Run("hidden renamed onto a visible name", func(t *testing.T) {
		if err := os.Rename(m.h(".env"), m.h("was-env.txt")); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(m.p("was-env.txt")); err != nil || string(b) != "OLD-SECRET" {
			t.Errorf("read was-env.txt = %q, %v: it is that name now", b, err)
		}
	})

	t.Run("visible renamed onto a hidden name", func(t *testing.T) {
		if _, err := os.Stat(m.p("b.txt")); err != nil {
			t.Fatal(err)
		}
		held, err := os.OpenFile(m.p("b.txt"), os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		opath, err := unix.Open(m.p("b.txt"), unix.O_PATH, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(opath)
		if err := os.Rename(m.h("b.txt"), m.h(".env")); err != nil {
			t.Fatal(err)
		}
		for _, rel := range []string{"b.txt", ".env"} {
			_, err := os.Stat(m.p(rel))
			wantErrno(t, "stat "+rel, err, unix.ENOENT)
		}
		if got := names(t, m.dir); slices.Contains(got, "b.txt") || slices.Contains(got, ".env") {
			t.Errorf("root lists %v", got)
		}
		// The node the kernel still holds: reopening it, or asking its
		// attributes, goes to the server, which finds it reachable by no
		// visible name.
		_, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", opath), unix.O_RDONLY, 0)
		wantErrno(t, "reopen through a held O_PATH descriptor", err, unix.ENOENT)
		// An already open descriptor keeps reading (documented), and its
		// attributes stay readable while it is open.
		buf := make([]byte, 8)
		if n, err := held.ReadAt(buf, 0); string(buf[:n]) != "B" {
			t.Errorf("held descriptor reads %q, %v; documented to keep reading", buf[:n], err)
		}
		held.Close()
		// The kernel sends RELEASE after close returns.
		var st unix.Stat_t
		err = unix.Fstat(opath, &st)
		for i := 0; err == nil && i < 100; i++ {
			time.Sleep(10 * time.Millisecond)
			err = unix.Fstat(opath, &st)
		}
		wantErrno(t, "fstat of a held O_PATH descriptor", err, unix.ENOENT)
	})

	t.Run("hidden file replaced by rename stays hidden", func(t *testing.T) {
		_, err := os.Stat(m.p(".env"))
		wantErrno(t, "stat .env before", err, unix.ENOENT)
		// How sed -i and editors save: a temporary file renamed onto the name.
		os.WriteFile(m.h("sedAbC123"), []byte("REPLACED-SECRET"), 0o644)
		if err := os.Rename(m.h("sedAbC123"), m.h(".env")); err != nil {
			t.Fatal(err)
		}
		_, err = os.ReadFile(m.p(".env"))
		wantErrno(t, "read .env after", err, unix.ENOENT)
		_, err = os.Stat(m.p("sedAbC123"))
		wantErrno(t, "stat the temporary name", err, unix.ENOENT)
		if got := names(t, m.dir); slices.Contains(got, ".env") {
			t.Errorf("root lists %v", got)
		}
	})

	t.Run("held directory renamed onto a hidden name", func(t *testing.T) {
		dfd, err := unix.Open(m.p("dir"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dfd)
		if err := os.Rename(m.h("dir"), m.h("secrets")); err != nil {
			t.Fatal(err)
		}
		_, err = unix.Openat(dfd, "f.txt", unix.O_RDONLY, 0)
		wantErrno(t, "open f.txt relative to the held directory", err, unix.ENOENT)
		_, err = unix.Getdents(dfd, make([]byte, 4096))
		wantErrno(t, "list the held directory", err, unix.ENOENT)
		os.WriteFile(m.h("secrets/later.txt"), []byte("S"), 0o644)
		var st unix.Stat_t
		wantErrno(t, "stat a file created later in it", unix.Fstatat(dfd, "later.txt", &st, 0), unix.ENOENT)
	})

	t.Run("held directory moved out of the tree", func(t *testing.T) {
		dfd, err := unix.Open(m.p("dir2"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dfd)
		if err := os.Rename(m.h("dir2"), outside+"/dir2"); err != nil {
			t.Fatal(err)
		}
		_, err = unix.Openat(dfd, "g.txt", unix.O_RDONLY, 0)
		wantErrno(t, "open g.txt relative to the moved directory", err, unix.ENOENT)
	})

	t.Run("host renames a visible directory to a visible name", func(t *testing.T) {
		os.MkdirAll(m.h("v1"), 0o755)
		os.WriteFile(m.h("v1/x.txt"), []byte("X"), 0o644)
		dfd, err := unix.Open(m.p("v1"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dfd)
		if err := os.Rename(m.h("v1"), m.h("v2")); err != nil {
			t.Fatal(err)
		}
		// Still visible (as v2): a descriptor held on it keeps working.
		fd, err := unix.Openat(dfd, "x.txt", unix.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("open x.txt in a renamed visible directory: %v", err)
		}
		unix.Close(fd)
	})
}
