// Package bytesize reads the sizes that policies, provider parameters and the
// command line give in bytes: a positive decimal number with an optional binary
// suffix, k, m, g or t (any case, optionally followed by b or ib: 64m, 64M, 64MiB
// and 64MB are all 64 << 20).
package bytesize

import (
	"errors"
	"strconv"
	"strings"
)

// Max is the largest size Parse accepts (4 EiB): beyond it a size is a mistake,
// and products of a few sizes still fit in 64 bits.
const Max = 1 << 62

// ErrSyntax is the error of a string that is not a size Parse accepts.
var ErrSyntax = errors.New("expected a positive size such as 4096, 64k or 512m")

// Parse reads a size in bytes (see the package doc). Zero, a negative number, a
// fraction, an unknown suffix and a size above Max are refused with ErrSyntax.
func Parse(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if strings.HasSuffix(t, "ib") {
		t = t[:len(t)-2]
	} else {
		t = strings.TrimSuffix(t, "b")
	}
	mult := uint64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k':
			mult, t = 1<<10, t[:n-1]
		case 'm':
			mult, t = 1<<20, t[:n-1]
		case 'g':
			mult, t = 1<<30, t[:n-1]
		case 't':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v == 0 || v > Max/mult {
		return 0, ErrSyntax
	}
	return v * mult, nil
}
