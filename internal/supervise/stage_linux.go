package supervise

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func noNewPrivs() error {
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}

// dropCapabilities empties the calling thread's bounding, ambient, inheritable,
// permitted and effective capability sets. With an empty bounding set, exec of any
// program (setuid root or run by uid 0) gains nothing.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == unix.EINVAL {
			break // past the last capability the kernel knows
		}
		if err != nil {
			// Without CAP_SETPCAP the set cannot be changed; it is then only empty
			// if it already is (an unprivileged process): check it.
			v, rerr := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
			if rerr == unix.EINVAL {
				break // past the last capability the kernel knows
			}
			if v != 0 && err == unix.EPERM && unprivilegedNNP() {
				break // nothing to gain through it (see unprivilegedNNP)
			}
			if rerr != nil || v != 0 {
				return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
			}
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing the capability sets: %w", err)
	}
	return nil
}

// unprivilegedNNP reports a thread that holds no capability (permitted set
// empty) under no_new_privs: exec can give it none back, whatever its bounding
// set, which it cannot change.
func unprivilegedNNP() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return data[0].Permitted == 0 && data[1].Permitted == 0 && err == nil && v == 1
}
