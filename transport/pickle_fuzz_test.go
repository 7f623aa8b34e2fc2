package transport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzOpts keeps each fuzz input's work small.
var fuzzOpts = UnpickleOptions{MaxBytes: 1 << 20, MaxOps: 1 << 16, MaxMemo: 1 << 12, MaxDepth: 200,
	MaxString: 1 << 16, MaxIntBytes: 1 << 12, MaxContainer: 1 << 14, MaxValues: 1 << 18}

func addPickleSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "pickle", "*.pkl"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed pickles: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) <= 1<<16 {
			f.Add(b)
		}
	}
	// Go's own pickles of generated values.
	g := newValueGen(7)
	for i := 0; i < 50; i++ {
		v, _ := g.value(1)
		if p, err := Pickle(v); err == nil && len(p) < 1<<14 {
			f.Add(p)
		}
	}
}

// FuzzUnpickle: any input decodes or fails with an *UnpickleError, never panics
// (the decoder's own recover is disabled here through a check of the error), within
// the budgets and the memory bound (checkAccounting); a data-only result
// re-encodes and decodes to the same value; what decodes as data holds no Object
// or Global in Objects mode either (HoldsObjects agrees with the type table).
func FuzzUnpickle(f *testing.F) {
	addPickleSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		dataOK := false
		for _, mode := range []Mode{DataOnly, Objects} {
			opts := fuzzOpts
			opts.Mode = mode
			v, d, err := unpickle(data, opts.withDefaults())
			checkAccounting(t, data, d, v, err)
			if err != nil {
				var ue *UnpickleError
				if !errors.As(err, &ue) {
					t.Fatalf("error %T is not an *UnpickleError: %v", err, err)
				}
				if strings.Contains(ue.Reason, "internal error") {
					t.Fatalf("decoder panicked: %v", err)
				}
				if !hasSentinel(err) {
					t.Fatalf("error without a sentinel: %v", err)
				}
				continue
			}
			if mode == Objects {
				if dataOK && HoldsObjects(v) {
					t.Fatalf("decoded as data, but its objects-mode value holds an Object or Global: %s", repr(v))
				}
				continue
			}
			dataOK = true
			p, err := Pickle(v)
			if err != nil {
				t.Fatalf("decoded %s but cannot re-encode it: %v", repr(v), err)
			}
			back, err := Unpickle(p, nil)
			if err != nil {
				t.Fatalf("re-encoded %s does not decode: %v", repr(v), err)
			}
			if a, b := repr(normalize(v, false)), repr(normalize(back, false)); a != b {
				t.Fatalf("round trip differs: %s", reprDiff(a, b))
			}
		}
	})
}

func hasSentinel(err error) bool {
	for _, s := range []error{ErrBudget, ErrForbiddenOpcode, ErrForbiddenGlobal, ErrTruncated, ErrCycle, ErrMalformed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// checkAccounting checks the memory bound on one decode: the decoder's accounted
// peak never passes MemoryPerByte*n + MemoryBase, its accounting never goes
// negative (a credit for more than was charged), and a decoded value holds no more
// heap than the decoder accounted for at the end (goSize: the accounting does not
// under-count).
func checkAccounting(t *testing.T, data []byte, d *decoder, v any, err error) {
	t.Helper()
	if d.memPeak > memBound(len(data)) {
		t.Fatalf("accounted peak %d > bound %d for %d bytes", d.memPeak, memBound(len(data)), len(data))
	}
	if d.mem < 0 {
		t.Fatalf("accounting went negative: %d", d.mem)
	}
	if err == nil {
		if n := goSize(v); n > d.mem {
			t.Fatalf("the value holds %d bytes, the decoder accounted %d", n, d.mem)
		}
	}
}

// FuzzPickleRoundTrip: generated values (from a fuzzed seed) survive Go's round trip.
func FuzzPickleRoundTrip(f *testing.F) {
	for i := uint64(0); i < 8; i++ {
		f.Add(i)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		v, _ := newValueGen(seed).value(0)
		p, err := Pickle(v)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unpickle(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := repr(normalize(v, false)), repr(normalize(back, false)); a != b {
			t.Fatal(fmt.Sprint("round trip differs: ", reprDiff(a, b)))
		}
	})
}
