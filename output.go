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

// Output is what a call or an evaluation printed on sys.stdout and
// sys.stderr, captured. Capturing is the default: the host's own standard
// output stays the host's (a program that speaks a protocol on it, such as
// an MCP server over stdio, is not corrupted by a print). A stream is
// streamed instead when it is given a writer (CallOptions.Stdout and Stderr,
// EvalOutput, or the sandbox's CallConfig.Stdout).
//
// What is captured is bounded: by Limits.Output when it is set, else by
// DefaultCallOutput for a call and the evaluation's output limit for an
// evaluation (see EvalLimits). Past the bound the call or evaluation fails
// with ErrOutputLimit (an *evalguard.InterruptedError of Budget "output" for
// an evaluation), and Output holds what was printed before.
type Output struct {
	Stdout, Stderr []byte
}

// capture collects the streams of one call or evaluation that have no writer.
// Writes that arrive after finish (the worker's reader may still hold a frame
// of a call the host gave up on) are dropped.
type capture struct {
	mu       sync.Mutex
	out, err []byte
	done     bool
}

// writer returns the writer of one stream (stderr false: stdout).
func (c *capture) writer(stderr bool) io.Writer { return captureWriter{c: c, stderr: stderr} }

// finish returns what was captured; later writes are dropped.
func (c *capture) finish() Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	return Output{Stdout: c.out, Stderr: c.err}
}

type captureWriter struct {
	c      *capture
	stderr bool
}

func (w captureWriter) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		if w.stderr {
			c.err = append(c.err, p...)
		} else {
			c.out = append(c.out, p...)
		}
	}
	return len(p), nil
}

// streams resolves where each stream of one call or evaluation goes: its own
// writer, else the capture when the caller asked for it (capture), else the
// sandbox's writer (CallConfig.Stdout), else the capture. captured reports that
// at least one stream is captured.
func streams(own [2]io.Writer, captureAsked bool, sandbox [2]io.Writer, c *capture) (out [2]io.Writer, captured bool) {
	for i := range out {
		switch {
		case own[i] != nil:
			out[i] = own[i]
		case !captureAsked && sandbox[i] != nil:
			out[i] = sandbox[i]
		default:
			out[i] = c.writer(i == 1)
			captured = true
		}
	}
	return out, captured
}
