package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pysandboxes/pysandboxes"
	"github.com/pysandboxes/pysandboxes/evalguard"
	"github.com/pysandboxes/pysandboxes/transport"
)

// evalInput are the arguments of eval_python.
type evalInput struct {
	Source  string          `json:"source"`
	Names   json.RawMessage `json:"names"`
	Profile string          `json:"profile"`
	Mode    string          `json:"mode"`
}

// EvalResult is the structured result of eval_python: the value, or what
// stopped the evaluation.
type EvalResult struct {
	// Value is the value as JSON (transport.JSON); in mode exec, an object of
	// the names the code bound.
	Value       json.RawMessage `json:"value,omitempty"`
	Stdout      string          `json:"stdout,omitempty"`
	Stderr      string          `json:"stderr,omitempty"`
	Violations  []Violation     `json:"violations,omitempty"`
	Interrupted *Interruption   `json:"interrupted,omitempty"`
	Exception   *Exception      `json:"exception,omitempty"`
	Refusals    []Refusal       `json:"refusals,omitempty"`
	Error       string          `json:"error,omitempty"`
}

// Violation is one place where a source breaks its eval profile.
type Violation struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Kind    string `json:"kind"`
	Name    string `json:"name,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// Interruption is the budget that ended an evaluation.
type Interruption struct {
	Budget  string `json:"budget"`
	Limit   string `json:"limit"`
	Message string `json:"message,omitempty"`
}

// Exception is an exception the evaluated code raised.
type Exception struct {
	Class     string `json:"class"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

// evalPython evaluates in.Source under the sandbox's eval profile.
func (t *Tools) evalPython(ctx context.Context, raw json.RawMessage) *sdk.CallToolResult {
	var in evalInput
	if err := t.evalIn.decodeArgs(raw, &in); err != nil {
		return failure(EvalPythonTool+": "+err.Error(), nil)
	}
	if len(in.Source) > t.opts.MaxSource {
		return failure(fmt.Sprintf("%s: the source is limited to %d bytes (got %d)", EvalPythonTool, t.opts.MaxSource, len(in.Source)), nil)
	}
	names, err := decodeNames(in.Names)
	if err != nil {
		return failure(EvalPythonTool+": "+err.Error(), nil)
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	var out pysandboxes.Output
	opts := []pysandboxes.EvalOption{
		pysandboxes.EvalProfile(in.Profile), pysandboxes.EvalCapture(&out), pysandboxes.EvalMaxOutput(t.opts.MaxOutput),
	}
	var value any
	if in.Mode == "exec" {
		var ns map[string]any
		ns, err = t.sb.Exec(ctx, in.Source, names, opts...)
		if err == nil {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range ns {
					if !yield(k) {
						return
					}
				}
			})
			d := make(transport.Dict, len(keys))
			for i, k := range keys {
				d[i] = transport.Pair{Key: k, Value: ns[k]}
			}
			value = d
		}
	} else {
		value, err = t.sb.Eval(ctx, in.Source, names, opts...)
	}
	res := EvalResult{Stdout: text(out.Stdout), Stderr: text(out.Stderr)}
	if err != nil {
		return t.evalFailure(err, res)
	}
	b, err := transport.JSON(value)
	if err != nil {
		res.Error = "the value cannot be written as JSON: " + err.Error()
		return failure(EvalPythonTool+": "+res.Error, res)
	}
	if int64(len(b)) > t.opts.MaxOutput {
		res.Error = fmt.Sprintf("the value is %d bytes of JSON, more than the %d the server returns", len(b), t.opts.MaxOutput)
		return failure(EvalPythonTool+": "+res.Error, res)
	}
	res.Value = b
	return success(res)
}

func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// evalFailure describes why an evaluation failed, as a tool error.
func (t *Tools) evalFailure(err error, res EvalResult) *sdk.CallToolResult {
	var rej *evalguard.RejectedError
	var ie *evalguard.InterruptedError
	var re *pysandboxes.RemoteError
	var b strings.Builder
	switch {
	case errors.As(err, &rej):
		fmt.Fprintf(&b, "%s: the eval profile rejects the source (the profile is the operator's: rewrite the code within it, or ask for the rule line)\n", EvalPythonTool)
		if len(rej.Violations) == 0 {
			b.WriteString(rej.Error() + "\n")
		}
		for _, v := range rej.Violations {
			res.Violations = append(res.Violations, Violation{
				Line: v.Line, Col: v.Col, Kind: v.Kind, Name: v.Name, Message: v.Message, Fix: v.Fix, Warning: v.Warning,
			})
			if v.Line > 0 {
				fmt.Fprintf(&b, "line %d, col %d: ", v.Line, v.Col)
			}
			b.WriteString(v.Message + "\n")
			if v.Fix != "" {
				fmt.Fprintf(&b, "    rule line that would allow it: %s\n", v.Fix)
			} else {
				b.WriteString("    no eval- rule allows it\n")
			}
			if v.Warning != "" {
				fmt.Fprintf(&b, "    warning: %s\n", v.Warning)
			}
		}
	case errors.As(err, &ie):
		line := ie.Rule()
		res.Interrupted = &Interruption{Budget: ie.Budget, Limit: line, Message: ie.Message}
		fmt.Fprintf(&b, "%s: the evaluation was interrupted by its budget %s\n", EvalPythonTool, line)
		if ie.Message != "" {
			b.WriteString(ie.Message + "\n")
		}
	case errors.As(err, &re):
		res.Exception = &Exception{Class: re.Class(), Message: re.Message, Traceback: re.Traceback}
		if res.Stdout == "" && res.Stderr == "" {
			res.Stdout, res.Stderr = text(re.Output.Stdout), text(re.Output.Stderr)
		}
		for _, d := range re.Denials {
			res.Refusals = append(res.Refusals, refusalOf(d))
		}
		var de *evalguard.DeniedError
		if errors.As(err, &de) && de.Fix != "" && len(res.Refusals) > 0 {
			for i := range res.Refusals {
				if res.Refusals[i].Kind == "eval" && res.Refusals[i].Fix == "" {
					res.Refusals[i].Fix = de.Fix
				}
			}
		}
		fmt.Fprintf(&b, "%s: the code raised %s: %s\n", EvalPythonTool, re.Class(), re.Message)
		if re.Traceback != "" {
			b.WriteString("--- traceback\n" + strings.TrimRight(re.Traceback, "\n") + "\n")
		}
		if res.Stdout != "" {
			b.WriteString("--- stdout\n" + strings.TrimRight(res.Stdout, "\n") + "\n")
		}
		if res.Stderr != "" {
			b.WriteString("--- stderr\n" + strings.TrimRight(res.Stderr, "\n") + "\n")
		}
		writeRefusals(&b, res.Refusals)
	case errors.Is(err, context.DeadlineExceeded):
		line := fmt.Sprintf("timeout=%v", t.opts.Timeout)
		res.Interrupted = &Interruption{Budget: "timeout", Limit: line, Message: "the server's timeout passed: the evaluation was killed"}
		fmt.Fprintf(&b, "%s: the evaluation was interrupted by the server's %s\n", EvalPythonTool, line)
	case errors.Is(err, context.Canceled):
		res.Error = "cancelled: the evaluation was killed"
		fmt.Fprintf(&b, "%s: %s\n", EvalPythonTool, res.Error)
	default:
		res.Error = err.Error()
		fmt.Fprintf(&b, "%s: %v\n", EvalPythonTool, err)
	}
	return failure(strings.TrimSuffix(b.String(), "\n"), res)
}
