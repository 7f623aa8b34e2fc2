package hidefs

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// A directory of the tree is swapped for a symbolic link to a directory
// outside it, in a tight loop, while files are opened, listed and stat'ed
// through the mount. The reader resolves without following symbolic links
// itself (RESOLVE_NO_SYMLINKS), so anything outside that it could read would
// have come from the server following or resolving something: it must only
// ever see the inside file or an error.
func TestSymlinkSwapRace(t *testing.T) {
	host := tree(t, map[string]string{"a.txt": "A", "sub/secret": "INSIDE"})
	outside := tree(t, map[string]string{"secret": "OUTSIDE", "only-outside": "OUTSIDE"})
	m := startMount(t, host, Options{Filter: ignores(host, ".env")}, mountOpts{})
	mroot, err := unix.Open(m.dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(mroot)

	const swaps = 3000
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop.Store(true)
		for i := 0; i < swaps; i++ {
			// sub (a directory) <-> sub (a link to outside), both directions by
			// an atomic exchange, as a hostile process would.
			os.Symlink(outside, m.h("sub.link"))
			unix.Renameat2(unix.AT_FDCWD, m.h("sub.link"), unix.AT_FDCWD, m.h("sub"), unix.RENAME_EXCHANGE)
			unix.Renameat2(unix.AT_FDCWD, m.h("sub.link"), unix.AT_FDCWD, m.h("sub"), unix.RENAME_EXCHANGE)
			os.Remove(m.h("sub.link"))
		}
	}()
	var reads, insides atomic.Int64
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			dents := make([]byte, 4096)
			for !stop.Load() {
				fd, err := unix.Openat2(mroot, "sub/secret", &unix.OpenHow{Flags: unix.O_RDONLY, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH})
				if err == nil {
					n, _ := unix.Read(fd, buf)
					unix.Close(fd)
					reads.Add(1)
					switch got := string(buf[:max(n, 0)]); got {
					case "INSIDE":
						insides.Add(1)
					default:
						t.Errorf("read %q through the mount", got)
					}
				}
				dfd, err := unix.Openat2(mroot, "sub", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH})
				if err == nil {
					n, _ := unix.Getdents(dfd, dents)
					if n > 0 && strings.Contains(string(dents[:n]), "only-outside") {
						t.Error("listed the outside directory through the mount")
					}
					var st unix.Stat_t
					if unix.Fstatat(dfd, "only-outside", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
						t.Error("stat'ed an outside name through the mount")
					}
					unix.Close(dfd)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d swaps, %d reads through the mount (%d of the inside file)", swaps, reads.Load(), insides.Load())
	if reads.Load() == 0 {
		t.Log("no read won the race this time (every open met the link or a missing name)")
	}
}
