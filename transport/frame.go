package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Kind says what a frame carries.
type Kind byte

// DefaultMaxFrame is the default bound of one frame (kind + payload).
const DefaultMaxFrame = 16 << 20

// HeaderSize is the size of a frame header: length and kind.
const HeaderSize = 5

var (
	// ErrFrameTooLarge reports a frame longer than the reader's or writer's limit.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrEmptyFrame reports a frame whose length does not even cover its kind.
	ErrEmptyFrame = errors.New("transport: empty frame")
)

// Frame is one message.
type Frame struct {
	Kind    Kind
	Payload []byte
}

// Reader reads frames from a stream.
type Reader struct {
	r   io.Reader
	max int
	hdr [HeaderSize]byte
}

// NewReader returns a Reader refusing frames longer than max bytes (kind included);
// max <= 0 means DefaultMaxFrame.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &Reader{r: r, max: max}
}

// Read reads the next frame. At a clean end of stream (between frames) it returns
// io.EOF; a stream cut inside a frame gives io.ErrUnexpectedEOF. A frame over the
// limit is refused with ErrFrameTooLarge before its payload is read; the stream is
// then unusable.
func (r *Reader) Read() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("transport: truncated frame header: %w", err)
		}
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:4])
	if n == 0 {
		return Frame{}, ErrEmptyFrame
	}
	if uint64(n) > uint64(r.max) {
		return Frame{}, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, r.max)
	}
	payload, err := readPayload(r.r, int(n-1))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, fmt.Errorf("transport: truncated frame of %d bytes: %w", n, err)
	}
	return Frame{Kind: Kind(r.hdr[4]), Payload: payload}, nil
}

// firstChunk is what a reader allocates for a payload before any of it arrives.
const firstChunk = 64 << 10

// readPayload reads n bytes into a buffer that grows (doubling) as they arrive:
// a header claiming a large frame costs nothing until its bytes come, and the
// buffer never holds more than twice what was received plus firstChunk.
func readPayload(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, firstChunk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// Writer writes frames to a stream; it is safe for concurrent use (frames are never
// interleaved).
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	max int
}

// NewWriter returns a Writer refusing frames longer than max bytes; max <= 0 means
// DefaultMaxFrame.
func NewWriter(w io.Writer, max int) *Writer {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &Writer{w: w, max: max}
}

// Write writes one frame.
func (w *Writer) Write(kind Kind, payload []byte) error {
	n := len(payload) + 1
	if n > w.max || uint64(n) > 0xffffffff {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, w.max)
	}
	buf := make([]byte, HeaderSize+len(payload))
	binary.BigEndian.PutUint32(buf[:4], uint32(n))
	buf[4] = byte(kind)
	copy(buf[HeaderSize:], payload)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(buf)
	return err
}
