package qemu

import (
	"bytes"
	"errors"
	"testing"
)

// TestUnxzRefusesGarbage: what is not a single-block xz stream of the kernel's
// kind is refused with ErrXZ, never a panic.
func TestUnxzRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("not xz at all, not even close"), append(append([]byte{}, xzMagic...), bytes.Repeat([]byte{0xff}, 64)...)} {
		if _, err := unxz(b); err == nil {
			t.Errorf("%q: accepted", b)
		} else if !errors.Is(err, ErrXZ) {
			t.Logf("%q: %v (not ErrXZ)", b, err)
		}
	}
}

// FuzzUnxz: a kernel image given by qemu.kernel= is a file the user chose;
// its payload never panics the decoder nor makes it allocate without bound.
func FuzzUnxz(f *testing.F) {
	f.Add(append(append([]byte{}, xzMagic...), 0, 4, 0xe6, 0xd6, 0xb4, 0x46, 2, 0, 0x21, 1, 0x16, 0, 0, 0))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := unxz(b)
		if err == nil && len(out) > maxUnpacked {
			t.Fatalf("%d bytes unpacked", len(out))
		}
	})
}
