package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	frames := []Frame{{Type: Hello, Payload: []byte{Version}}, {Type: Data, ID: 7, Payload: bytes.Repeat([]byte("x"), ChunkSize)}, {Type: EOF, ID: 7}}
	for _, f := range frames {
		if err := w.Write(f.Type, f.ID, f.Payload); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&b)
	for i, want := range frames {
		got, err := r.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Type != want.Type || got.ID != want.ID || !bytes.Equal(got.Payload, want.Payload) {
			t.Errorf("frame %d: got %v %d (%d bytes), want %v %d (%d bytes)", i, got.Type, got.ID, len(got.Payload), want.Type, want.ID, len(want.Payload))
		}
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}

// TestOversizedFrame: a length beyond MaxPayload is refused before anything
// is allocated for it.
func TestOversizedFrame(t *testing.T) {
	var b bytes.Buffer
	NewWriter(&b).Write(Data, 1, []byte("abc"))
	raw := b.Bytes()
	raw[len(raw)-3-4], raw[len(raw)-3-3] = 0x7f, 0xff // the length's high bytes
	_, err := NewReader(bytes.NewReader(raw)).Read()
	if !errors.Is(err, ErrFrame) {
		t.Fatalf("got %v, want ErrFrame", err)
	}
}

// FuzzReader: what the guest sends (root in the guest controls it) never
// panics the host's reader, nor makes it allocate beyond MaxPayload.
func FuzzReader(f *testing.F) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write(Hello, 0, []byte{Version})
	w.Write(Exit, 3, append(U32(256), "msg"...))
	f.Add(b.Bytes())
	f.Add([]byte{magic0, magic1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for range 64 {
			fr, err := r.Read()
			if err != nil {
				return
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("a payload of %d bytes", len(fr.Payload))
			}
			ParseU32(fr.Payload)
		}
	})
}
