package bytesize

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]uint64{
		"1": 1, "4096": 4096, " 64m ": 64 << 20, "64M": 64 << 20, "64MiB": 64 << 20, "64mb": 64 << 20,
		"2k": 2 << 10, "2KB": 2 << 10, "3g": 3 << 30, "1T": 1 << 40, "1tib": 1 << 40, "7b": 7,
		"4194304t": Max, "4611686018427387904": Max,
	}
	for s, want := range good {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "0m", "-1", "1.5m", "m", "b", "ib", "64x", "64 m", "64mm", "64bi",
		"4194305t", "4611686018427387905", "18446744073709551616", "0x10", "+1"} {
		if got, err := Parse(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %d, %v; want ErrSyntax", s, got, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"64m", "1TiB", "0", "4611686018427387904", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) || n != 0 {
				t.Fatalf("Parse(%q) = %d, %v", s, n, err)
			}
			return
		}
		if n == 0 || n > Max {
			t.Fatalf("Parse(%q) = %d, out of range", s, n)
		}
	})
}
