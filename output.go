package pysandboxes

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// outputLimit counts the bytes written to the wrapped writers together; past the
// limit it drops the rest and calls exceeded once.
type outputLimit struct {
	mu       sync.Mutex
	n, limit int64
	tripped  bool
	exceeded func()
}

func (o *outputLimit) wrap(w io.Writer) io.Writer { return &limitedWriter{o: o, w: w} }

type limitedWriter struct {
	o *outputLimit
	w io.Writer
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	o := l.o
	o.mu.Lock()
	room := o.limit - o.n
	keep := int64(len(p))
	if keep > room {
		keep = max(room, 0)
	}
	o.n += keep
	trip := !o.tripped && int64(len(p)) > keep
	if trip {
		o.tripped = true
	}
	o.mu.Unlock()
	if trip {
		o.exceeded()
	}
	if keep > 0 {
		if _, err := l.w.Write(p[:keep]); err != nil {
			return 0, err
		}
	}
	return len(p), nil // drop the rest, keep draining the pipe
}

// limitedReader counts what is read from a pipe of the program's output and drops
// what lies past the limit.
type limitedReader struct {
	o *outputLimit
	r *os.File
}

func (l *limitedReader) Read(p []byte) (int, error) {
	for {
		n, err := l.r.Read(p)
		if n == 0 {
			return 0, err
		}
		var keep int64
		l.o.mu.Lock()
		keep = min(int64(n), max(l.o.limit-l.o.n, 0))
		l.o.n += keep
		trip := !l.o.tripped && keep < int64(n)
		if trip {
			l.o.tripped = true
		}
		l.o.mu.Unlock()
		if trip {
			l.o.exceeded()
		}
		if keep > 0 || err != nil {
			return int(keep), err
		}
	}
}

func (l *limitedReader) Close() error { return l.r.Close() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

// syncBuffer is a bytes.Buffer safe for two writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// closeOnce closes its file once, however many times Close is called.
type closeOnce struct {
	*os.File
	once sync.Once
	err  error
}

func (c *closeOnce) Close() error {
	c.once.Do(func() { c.err = c.File.Close() })
	return c.err
}
