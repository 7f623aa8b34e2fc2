//go:build unix

package policy

import "syscall"

// learnNoFollow makes an open refuse a symbolic link as the last component.
const learnNoFollow = syscall.O_NOFOLLOW
