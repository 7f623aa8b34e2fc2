package transport

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	want := []Frame{{1, []byte("hello")}, {2, nil}, {255, bytes.Repeat([]byte{7}, 70000)}}
	for _, f := range want {
		if err := w.Write(f.Kind, f.Payload); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf, 0)
	var got []Frame
	for {
		f, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}

func TestFrameBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"over the limit, refused before reading the payload", []byte{0, 0, 1, 0, 1}, 100, ErrFrameTooLarge},
		{"4 GiB length", []byte{0xff, 0xff, 0xff, 0xff, 1}, 0, ErrFrameTooLarge},
		{"zero length", []byte{0, 0, 0, 0, 1}, 0, ErrEmptyFrame},
		{"truncated header", []byte{0, 0}, 0, io.ErrUnexpectedEOF},
		{"truncated payload", []byte{0, 0, 0, 9, 1, 'a'}, 0, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.in), tc.max).Read()
			if !errors.Is(err, tc.want) {
				t.Errorf("Read = %v, want %v", err, tc.want)
			}
		})
	}
	if err := NewWriter(io.Discard, 10).Write(1, make([]byte, 10)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("Write over the limit = %v", err)
	}
}

// FuzzFrameReader: any byte stream gives frames or an error, within the limit,
// never a panic.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 6, 1, 'h', 'e', 'l', 'l', 'o'})
	f.Add([]byte{0, 0, 0, 1, 9, 0, 0, 0, 2, 3, 4})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1024)
		for i := 0; i < 1000; i++ {
			fr, err := r.Read()
			if err != nil {
				return
			}
			if len(fr.Payload)+1 > 1024 {
				t.Fatalf("frame of %d bytes over the limit", len(fr.Payload))
			}
		}
	})
}

// TestFrameReaderMemory: a header claiming a 16 MiB frame costs nothing until its
// bytes arrive: the reader holds at most three times what it received plus 64 KiB.
func TestFrameReaderMemory(t *testing.T) {
	for _, sent := range []int{0, 10, 100 << 10, 1 << 20} {
		hdr := []byte{0x01, 0x00, 0x00, 0x00, 9} // 16 MiB, kind 9
		in := io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, sent)))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := NewReader(in, 0).Read()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("sent %d: err = %v, want a truncated frame", sent, err)
		}
		// Allocations in all (garbage included): the buffers doubling from
		// 64 KiB, each at most twice what had arrived.
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4*sent+firstChunk+4096); got > limit {
			t.Errorf("sent %d of a 16 MiB frame: allocated %d bytes, want at most %d", sent, got, limit)
		}
	}
}
