package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestControlOrder: the init writes the spec to stage 2 as one line, then the
// program's signals in the order they came (those that came before the spec
// was written too), one byte each; SIGKILL and numbers that are no signal are
// not written (SIGKILL ends stage 2 itself); the pipe closes once the program
// ended.
func TestControlOrder(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &proc{cmd: &exec.Cmd{}, sigs: make(chan syscall.Signal, 64), done: make(chan struct{})}
	p.signal(syscall.SIGTERM) // before the spec is written
	p.signal(syscall.SIGKILL) // no process to kill yet: dropped
	p.signal(0)
	p.signal(65)
	done := make(chan struct{})
	go func() {
		p.control(w, []byte(`{"path":"/bin/true"}`))
		close(done)
	}()
	p.signal(syscall.SIGSTOP)
	p.signal(syscall.SIGUSR1)
	br := bufio.NewReader(r)
	spec, err := readLine(br, 1<<20)
	if err != nil || string(spec) != `{"path":"/bin/true"}` {
		t.Fatalf("spec %q, %v", spec, err)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatal(err)
	}
	if want := []byte{byte(syscall.SIGTERM), byte(syscall.SIGSTOP), byte(syscall.SIGUSR1)}; !bytes.Equal(got, want) {
		t.Errorf("signals %v, want %v", got, want)
	}
	close(p.done)
	<-done
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Errorf("after the program's end: %v, %v; want the end of the pipe", b, err)
	}
	p.signal(syscall.SIGTERM) // after the end: neither blocks nor panics
}

// TestReadLineBounded: a spec longer than the bound is refused, naming the
// bound; one cut short by the end of the pipe is an error.
func TestReadLineBounded(t *testing.T) {
	long := strings.Repeat("x", 200<<10) + "\n"
	if _, err := readLine(bufio.NewReaderSize(strings.NewReader(long), 16), 100<<10); err == nil || !strings.Contains(err.Error(), "longer than 102400 bytes") {
		t.Errorf("a line past the bound: %v", err)
	}
	if b, err := readLine(bufio.NewReaderSize(strings.NewReader(long), 16), 1<<20); err != nil || len(b) != 200<<10 {
		t.Errorf("a long line within the bound: %d bytes, %v", len(b), err)
	}
	if _, err := readLine(bufio.NewReader(strings.NewReader(`{"path"`)), 1<<20); err != io.EOF {
		t.Errorf("a spec without its end: %v, want EOF", err)
	}
}
