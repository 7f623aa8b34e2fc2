package policy

import (
	"time"

	"golang.org/x/sys/unix"
)

// coarseClock is how far behind a file system's time stamps may lag (they come
// from the kernel's coarse clock, which advances once a tick).
const coarseClock = 20 * time.Millisecond

// bornSince reports whether the file at path was made at or after t (made), and
// whether the file system tells (known): its birth time, from statx.
func bornSince(path string, t time.Time) (made, known bool) {
	if t.IsZero() {
		return false, true
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err != nil ||
		stx.Mask&unix.STATX_BTIME == 0 {
		return false, false
	}
	born := time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec))
	return !born.Before(t.Add(-coarseClock)), true
}
