// Package mountinfo decodes the paths of /proc/<pid>/mountinfo, for the qemu
// provider's host (its cgroup mounts) and its guest's init (the programs'
// mounts): the kernel writes a space, a tab, a newline and a backslash in a
// path as an octal escape (\040, \011, \012, \134).
package mountinfo

import (
	"strconv"
	"strings"
)

// Unescape undoes mountinfo's octal escapes; anything that is not one (a
// backslash not followed by three octal digits of a byte) is kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
