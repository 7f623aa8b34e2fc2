package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pysandboxes/pysandboxes"
)

// runInput are the arguments of run_python.
type runInput struct {
	Code     string   `json:"code"`
	Stdin    string   `json:"stdin"`
	TimeoutS *float64 `json:"timeout_s"`
}

// RunResult is the structured result of run_python.
type RunResult struct {
	ExitCode  int       `json:"exit_code"`
	Signal    string    `json:"signal,omitempty"`
	Stdout    string    `json:"stdout"`
	Stderr    string    `json:"stderr"`
	Truncated bool      `json:"truncated,omitempty"`
	TimedOut  bool      `json:"timed_out,omitempty"`
	Error     string    `json:"error,omitempty"`
	Refusals  []Refusal `json:"refusals"`
}

// runPython runs in.Code in a fresh interpreter under both layers, as
// Sandbox.Python runs "python -c CODE". It is a tool error when the program did
// not exit with status 0 (a refusal it did not catch, an exception, a timeout,
// too much output) or could not start.
func (t *Tools) runPython(ctx context.Context, raw json.RawMessage) *sdk.CallToolResult {
	var in runInput
	if err := t.runIn.decodeArgs(raw, &in); err != nil {
		return failure(RunPythonTool+": "+err.Error(), nil)
	}
	if len(in.Code) > t.opts.MaxSource || len(in.Stdin) > t.opts.MaxSource {
		return failure(fmt.Sprintf("%s: code and stdin are limited to %d bytes each (got %d and %d)",
			RunPythonTool, t.opts.MaxSource, len(in.Code), len(in.Stdin)), nil)
	}
	if strings.IndexByte(in.Code, 0) >= 0 {
		return failure(RunPythonTool+": the code holds a NUL character, which Python source cannot", nil)
	}
	timeout := t.opts.Timeout
	if in.TimeoutS != nil && *in.TimeoutS > 0 && *in.TimeoutS*1e9 < float64(timeout) && !math.IsNaN(*in.TimeoutS) {
		timeout = max(time.Duration(*in.TimeoutS*1e9), time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd := t.sb.Python(ctx, "-c", in.Code)
	cmd.Dir = t.opts.Dir
	cmd.Stdin = strings.NewReader(in.Stdin)
	out := &boundedOutput{limit: t.opts.MaxOutput, overflow: cmd.Terminate}
	cmd.Stdout, cmd.Stderr = outStream{out, 0}, outStream{out, 1}
	res := RunResult{ExitCode: -1, Refusals: []Refusal{}}
	if err := cmd.Start(); err != nil {
		res.Error = "the sandbox could not start the program: " + err.Error()
		return failure(RunPythonTool+": "+res.Error, res)
	}
	if t.opts.Started != nil {
		t.opts.Started(cmd.Pid())
	}
	err := cmd.Wait()
	res.Stdout, res.Stderr = out.text(0), out.text(1)
	for _, d := range cmd.Denials() {
		res.Refusals = append(res.Refusals, refusalOf(d))
	}
	if st, ok := cmd.Status(); ok {
		switch {
		case st.Exited():
			res.ExitCode = st.ExitStatus()
		case st.Signaled():
			res.Signal = signalName(st.Signal())
		}
	}
	var ee *pysandboxes.ExitError
	switch {
	case err == nil:
		return success(res)
	case out.exceeded():
		res.Truncated = true
		res.Error = fmt.Sprintf("the program printed more than %d bytes: it was killed", t.opts.MaxOutput)
	case errors.As(err, &ee) && ee.Err != nil:
		switch {
		case errors.Is(ee.Err, context.DeadlineExceeded):
			res.TimedOut = true
			res.Error = fmt.Sprintf("timed out after %v: the program was killed", timeout)
		case errors.Is(ee.Err, context.Canceled):
			res.Error = "cancelled: the program was killed"
		default:
			res.Error = "the sandbox ended the program: " + ee.Err.Error()
		}
	case errors.As(err, &ee):
		// It exited with a status, or a signal of its own making ended it.
	default:
		res.Error = err.Error()
	}
	return failure(runReport(res), res)
}

func signalName(s syscall.Signal) string {
	return fmt.Sprintf("%s (%d)", s.String(), int(s))
}

// runReport is the text of a failed run for the model: how it ended, its
// output, and each refusal with the rule line that would allow it.
func runReport(r RunResult) string {
	var b strings.Builder
	switch {
	case r.Error != "":
		b.WriteString(RunPythonTool + ": " + r.Error + "\n")
	case r.Signal != "":
		b.WriteString(RunPythonTool + ": the program was ended by signal " + r.Signal + "\n")
	default:
		fmt.Fprintf(&b, "%s: the program exited with status %d\n", RunPythonTool, r.ExitCode)
	}
	if r.Stdout != "" {
		b.WriteString("--- stdout\n" + r.Stdout)
		if !strings.HasSuffix(r.Stdout, "\n") {
			b.WriteString("\n")
		}
	}
	if r.Stderr != "" {
		b.WriteString("--- stderr\n" + r.Stderr)
		if !strings.HasSuffix(r.Stderr, "\n") {
			b.WriteString("\n")
		}
	}
	writeRefusals(&b, r.Refusals)
	return strings.TrimSuffix(b.String(), "\n")
}

// writeRefusals lists refusals, each with the rule that refused and the rule
// line that would allow it.
func writeRefusals(b *strings.Builder, rs []Refusal) {
	if len(rs) == 0 {
		return
	}
	b.WriteString("--- refused by the sandbox (the policy is the operator's: rewrite the code within it, or ask for the rule line)\n")
	for _, r := range rs {
		msg, _, _ := strings.Cut(r.Message, "\n")
		fmt.Fprintf(b, "- %s: %s\n  denied by %s\n", r.Exception, msg, r.DeniedBy)
		if r.Fix != "" {
			fmt.Fprintf(b, "  rule line that would allow it: %s\n", r.Fix)
		} else {
			b.WriteString("  no rule line added to the policy allows it\n")
		}
		if r.Warning != "" {
			fmt.Fprintf(b, "  warning: %s\n", r.Warning)
		}
	}
}
