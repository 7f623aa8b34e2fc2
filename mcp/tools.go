package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pysandboxes/pysandboxes"
)

// Defaults of Options.
const (
	DefaultMaxConcurrent = 4
	DefaultTimeout       = 30 * time.Second
	DefaultMaxOutput     = 1 << 20
	DefaultMaxSource     = 1 << 20
)

// The names of the tools.
const (
	RunPythonTool  = "run_python"
	EvalPythonTool = "eval_python"
)

// Options configure the tools AddTools adds. The zero value is the defaults.
type Options struct {
	// MaxConcurrent bounds the calls that run at once, both tools together
	// (DefaultMaxConcurrent when 0). A call past it waits for a slot; its
	// cancellation still ends the wait.
	MaxConcurrent int
	// Timeout is run_python's timeout when the call gives none, and the most a
	// call may ask for (DefaultTimeout when 0). It also bounds an evaluation,
	// beyond its profile's eval-timeout.
	Timeout time.Duration
	// MaxOutput bounds what a call prints, stdout and stderr together
	// (DefaultMaxOutput when 0): past it run_python's program is killed and the
	// result holds what came before; an evaluation is interrupted (budget
	// "output"). It also bounds the JSON of an evaluation's value.
	MaxOutput int64
	// MaxSource bounds the bytes of run_python's code and stdin, and of
	// eval_python's source (DefaultMaxSource when 0).
	MaxSource int
	// Dir is run_python's working directory ("" is the host's).
	Dir string
	// Started, when set, is called with the process id of each program
	// run_python starts, once it runs (for logs and tests).
	Started func(pid int)
	// Logger receives a debug line per call (nil: none).
	Logger *slog.Logger
}

// Tools are the tools added to a server, sharing one sandbox and one bound on
// concurrent calls.
type Tools struct {
	sb   *pysandboxes.Sandbox
	opts Options
	log  *slog.Logger

	slots chan struct{}
	// stop is done when Shutdown gives up waiting: every call in flight is
	// cancelled, and its processes killed.
	stop       context.Context
	cancelCall context.CancelFunc

	mu      sync.Mutex
	closing bool
	calls   sync.WaitGroup
	// sessions are the contexts of the sessions that called, each cancelled
	// when its session ends (the SDK does not end the calls of a session
	// that closes).
	sessions map[*sdk.ServerSession]context.Context

	runIn, evalIn toolSchema
}

// AddTools adds run_python and eval_python to server, each call run under sb's
// policy. opts may be nil. The tools are safe for concurrent use by any number
// of sessions; Shutdown (or Close) ends them.
func AddTools(server *sdk.Server, sb *pysandboxes.Sandbox, opts *Options) *Tools {
	t := &Tools{sb: sb}
	if opts != nil {
		t.opts = *opts
	}
	if t.opts.MaxConcurrent <= 0 {
		t.opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if t.opts.Timeout <= 0 {
		t.opts.Timeout = DefaultTimeout
	}
	if t.opts.MaxOutput <= 0 {
		t.opts.MaxOutput = DefaultMaxOutput
	}
	if t.opts.MaxSource <= 0 {
		t.opts.MaxSource = DefaultMaxSource
	}
	t.log = t.opts.Logger
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.slots = make(chan struct{}, t.opts.MaxConcurrent)
	t.stop, t.cancelCall = context.WithCancel(context.Background())
	t.runIn = mustSchema(runPythonInputSchema)
	t.evalIn = mustSchema(evalPythonInputSchema)
	runOut := mustSchema(runPythonOutputSchema)
	evalOut := mustSchema(evalPythonOutputSchema)

	server.AddTool(&sdk.Tool{
		Name:  RunPythonTool,
		Title: "Run Python in a sandbox",
		Description: "Runs Python code in a fresh sandboxed interpreter (python -c CODE) and returns its exit code, " +
			"stdout and stderr. The sandbox refuses what its policy does not grant (files, network, imports, " +
			"sensitive functions): each refusal is listed with the rule that refused it and the rule line that " +
			"would allow it, which only the operator of the policy can add; rewrite the code within what is granted.",
		InputSchema:  t.runIn.schema,
		OutputSchema: runOut.schema,
		Annotations:  &sdk.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
	}, t.handler(RunPythonTool, t.runPython))
	server.AddTool(&sdk.Tool{
		Name:  EvalPythonTool,
		Title: "Evaluate Python under an eval profile",
		Description: "Evaluates a Python expression (or runs statements, mode exec) under the sandbox's eval profile, " +
			"a declared sub-language with budgets, and returns the value as JSON. A source outside the profile is " +
			"rejected before it runs, each violation with the rule line that would allow it (for the operator); " +
			"an evaluation past a budget is interrupted, naming the budget.",
		InputSchema:  t.evalIn.schema,
		OutputSchema: evalOut.schema,
		Annotations:  &sdk.ToolAnnotations{OpenWorldHint: ptr(false), DestructiveHint: ptr(false)},
	}, t.handler(EvalPythonTool, t.evalPython))
	return t
}

func ptr[T any](v T) *T { return &v }

// handler wraps a tool: it refuses calls once the tools shut down, bounds the
// calls that run at once, and ties each call to Shutdown.
func (t *Tools) handler(name string, run func(context.Context, json.RawMessage) *sdk.CallToolResult) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		t.mu.Lock()
		if t.closing {
			t.mu.Unlock()
			return failure(name+": the server is shutting down; call again later", nil), nil
		}
		t.calls.Add(1)
		var sessCtx context.Context
		if req != nil && req.Session != nil {
			sessCtx = t.sessionContext(req.Session)
		}
		t.mu.Unlock()
		defer t.calls.Done()

		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(t.stop, cancel)()
		if sessCtx != nil {
			defer context.AfterFunc(sessCtx, cancel)()
		}

		select {
		case t.slots <- struct{}{}:
		case <-ctx.Done():
			return failure(name+": cancelled while waiting for a free slot", nil), nil
		}
		defer func() { <-t.slots }()

		var args json.RawMessage
		if req != nil && req.Params != nil {
			args = req.Params.Arguments
		}
		start := time.Now()
		res := run(ctx, args)
		t.log.Debug("tool call", "tool", name, "error", res.IsError, "duration", time.Since(start))
		return res, nil
	}
}

// sessionContext returns the context of ss, done once ss ends; t.mu is held.
func (t *Tools) sessionContext(ss *sdk.ServerSession) context.Context {
	if ctx, ok := t.sessions[ss]; ok {
		return ctx
	}
	if t.sessions == nil {
		t.sessions = map[*sdk.ServerSession]context.Context{}
	}
	ctx, cancel := context.WithCancel(t.stop)
	t.sessions[ss] = ctx
	go func() {
		ss.Wait()
		cancel()
		t.mu.Lock()
		delete(t.sessions, ss)
		t.mu.Unlock()
	}()
	return ctx
}

// Shutdown stops the tools: new calls fail (a tool error saying so), and the
// calls in flight may end until ctx is done; then they are cancelled, their
// processes killed, and Shutdown returns once they have all returned (with
// ctx's error).
func (t *Tools) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	t.cancelCall()
	<-done
	return ctx.Err()
}

// Close cancels the calls in flight (their processes are killed) and waits for
// them to return; new calls fail. It does not close the sandbox.
func (t *Tools) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	t.Shutdown(ctx)
	return nil
}

// success is a result whose structured content is out, and whose text is the
// same JSON (as the MCP specification asks of a tool with an output schema).
func success(out any) *sdk.CallToolResult {
	b, err := json.Marshal(out)
	if err != nil {
		return failure("the result cannot be written as JSON: "+err.Error(), nil)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}
}

// failure is a tool error (isError): text for the model, and the structured
// content out when there is one.
func failure(text string, out any) *sdk.CallToolResult {
	res := &sdk.CallToolResult{
		Content: []sdk.Content{&sdk.TextContent{Text: text}},
		IsError: true,
	}
	if out != nil {
		if b, err := json.Marshal(out); err == nil {
			res.StructuredContent = json.RawMessage(b)
		}
	}
	return res
}

// boundedOutput captures a program's two streams into one budget. Past it the
// rest is dropped and overflow is called, once.
type boundedOutput struct {
	mu       sync.Mutex
	limit    int64
	used     int64
	bufs     [2]bytes.Buffer
	over     bool
	overflow func()
}

type outStream struct {
	o *boundedOutput
	i int
}

func (s outStream) Write(p []byte) (int, error) {
	o := s.o
	o.mu.Lock()
	room := o.limit - o.used
	n := int64(len(p))
	fire := false
	if n > room {
		n = max(room, 0)
		if !o.over {
			o.over, fire = true, true
		}
	}
	o.bufs[s.i].Write(p[:n])
	o.used += n
	o.mu.Unlock()
	if fire && o.overflow != nil {
		o.overflow()
	}
	// The rest is dropped, never refused: the program is being killed, and a
	// refused write would only stop the copy, not the program.
	return len(p), nil
}

func (o *boundedOutput) text(i int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.ToValidUTF8(o.bufs[i].String(), "\uFFFD")
}

func (o *boundedOutput) exceeded() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.over
}
