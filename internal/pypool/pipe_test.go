package pypool

import (
	"io"
	"testing"
)

// TestPipeCloseWrite: after CloseWrite the child reads what was sent, then the
// end of the stream, and can still write to the host.
func TestPipeCloseWrite(t *testing.T) {
	p, err := NewPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Host.Close()
	defer p.Child.Close()
	if _, err := p.Host.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	p.CloseWrite()
	got, err := io.ReadAll(p.Child)
	if err != nil || string(got) != "bye" {
		t.Fatalf("the child read %q, %v; want \"bye\" then EOF", got, err)
	}
	if _, err := p.Child.Write([]byte("ok")); err != nil {
		t.Fatalf("the child's side closed too: %v", err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(p.Host, buf); err != nil || string(buf) != "ok" {
		t.Errorf("the host read %q, %v; want \"ok\"", buf, err)
	}
}
