package mcp

import (
	"context"
	"io"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pysandboxes/pysandboxes"
)

// DefaultCloseGrace is how long CommandTransport's connection waits for the
// server to exit once its standard input is closed.
const DefaultCloseGrace = 5 * time.Second

// CommandTransport is an SDK client transport that starts an MCP server
// confined by a sandbox and speaks to it over its standard input and output:
// Cmd is made by Sandbox.Command (node server.js DIR) or Sandbox.Python (a
// Python server, under the Python layer too). The server's standard error is
// Cmd.Stderr's (nil discards it).
//
// Closing the connection closes the server's standard input, as the MCP
// specification asks, waits CloseGrace (DefaultCloseGrace when 0) for it to
// exit, then kills its whole process tree; it returns once the server is
// reaped.
type CommandTransport struct {
	Cmd        *pysandboxes.Cmd
	CloseGrace time.Duration
}

// Connect starts the server.
func (t *CommandTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	stdout, err := t.Cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.Cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.Cmd.Start(); err != nil {
		return nil, err
	}
	grace := t.CloseGrace
	if grace <= 0 {
		grace = DefaultCloseGrace
	}
	tr := &sdk.IOTransport{Reader: io.NopCloser(stdout), Writer: &serverInput{WriteCloser: stdin, cmd: t.Cmd, grace: grace}}
	return tr.Connect(ctx)
}

// serverInput is the server's standard input; closing it ends the server.
type serverInput struct {
	io.WriteCloser
	cmd   *pysandboxes.Cmd
	grace time.Duration
	once  sync.Once
}

func (s *serverInput) Close() error {
	s.once.Do(func() {
		s.WriteCloser.Close()
		done := make(chan struct{})
		go func() {
			s.cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(s.grace):
			s.cmd.Terminate()
			<-done
		}
	})
	return nil
}
