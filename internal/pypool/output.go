package pypool

import (
	"io"
	"os"
	"sync"
)

// Output is where a pool's processes write: their own output (what they print
// outside a piece of work, and what reaches their descriptors 1 and 2
// directly), and the default writers of the work itself. All its writers share
// one lock, since they may be one writer.
type Output struct {
	// Out and Err receive the processes' own output.
	Out, Err io.Writer
	// Work holds the work's default writers (nil: captured).
	Work [2]io.Writer

	procOut, procErr io.Writer
}

// NewOutput returns the output of a pool whose processes write their own
// output to procOut and procErr, and whose work streams to workOut and
// workErr by default (nil: captured).
func NewOutput(procOut, procErr, workOut, workErr io.Writer) *Output {
	mu := new(sync.Mutex)
	o := &Output{Out: &lockedWriter{mu: mu, w: procOut}, Err: &lockedWriter{mu: mu, w: procErr}, procOut: procOut, procErr: procErr}
	if workOut != nil {
		o.Work[0] = &lockedWriter{mu: mu, w: workOut}
	}
	if workErr != nil {
		o.Work[1] = &lockedWriter{mu: mu, w: workErr}
	}
	return o
}

// ProcessStdio returns the writers to give a process as its standard output
// and error: the files themselves when they are files (so that the process
// writes there directly), else the locked writers.
func (o *Output) ProcessStdio() (stdout, stderr io.Writer) {
	stdout, stderr = o.Out, o.Err
	if f, ok := o.procOut.(*os.File); ok {
		stdout = f
	}
	if f, ok := o.procErr.(*os.File); ok {
		stderr = f
	}
	return stdout, stderr
}

// lockedWriter serializes the writes of the processes' output and of the
// work's default output, which may be one writer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
