package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
)

// The tools' schemas, as the MCP client sees them in tools/list. Inputs are
// validated against them before a tool runs; outputs (structuredContent) follow
// them.

const runPythonInputSchema = `{
  "type": "object",
  "properties": {
    "code": {
      "type": "string",
      "description": "Python source, run as python -c CODE would run it, in a fresh interpreter under the sandbox's policy"
    },
    "stdin": {
      "type": "string",
      "description": "what the program reads on its standard input (default: nothing)"
    },
    "timeout_s": {
      "type": "number",
      "exclusiveMinimum": 0,
      "description": "seconds after which the program and everything it started are killed (default and maximum: the server's)"
    }
  },
  "required": ["code"],
  "additionalProperties": false
}`

const refusalSchema = `{
  "type": "object",
  "description": "a refusal of the sandbox",
  "properties": {
    "kind": {"type": "string", "description": "file, network, import, api or eval"},
    "exception": {"type": "string", "description": "the Python exception class raised"},
    "message": {"type": "string"},
    "target": {"type": "string", "description": "what was refused: a path, an address, a module, a function"},
    "rule": {"type": "string", "description": "the rule that refused, as written; empty for the implicit default policy"},
    "ref": {"type": "string", "description": "the rule's file(line)"},
    "denied_by": {"type": "string", "description": "the rule that refused, or the implicit default policy"},
    "fix": {"type": "string", "description": "the rule line that would allow it, for the operator of the policy; absent when no rule line can"},
    "warning": {"type": "string", "description": "what the fix would open"}
  },
  "required": ["kind", "exception", "message", "target", "rule", "denied_by"]
}`

const runPythonOutputSchema = `{
  "type": "object",
  "properties": {
    "exit_code": {"type": "integer", "description": "the program's exit status; -1 when a signal, the timeout or the output limit ended it, or it did not start"},
    "signal": {"type": "string", "description": "the signal that ended the program"},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "truncated": {"type": "boolean", "description": "the output passed the server's limit: the program was killed, stdout and stderr hold what came before"},
    "timed_out": {"type": "boolean", "description": "the timeout passed: the program was killed"},
    "error": {"type": "string", "description": "why the program ended abnormally or could not start"},
    "refusals": {"type": "array", "items": ` + refusalSchema + `}
  },
  "required": ["exit_code", "stdout", "stderr", "refusals"]
}`

const evalPythonInputSchema = `{
  "type": "object",
  "properties": {
    "source": {
      "type": "string",
      "description": "a Python expression (mode eval) or statements (mode exec), checked against the eval profile's sub-language before it runs"
    },
    "names": {
      "type": "object",
      "description": "the variables the code sees, as JSON (objects become dicts, arrays lists)"
    },
    "profile": {
      "type": "string",
      "description": "the eval profile (eval-KEY:PROFILE= rules); default: the rules without a suffix"
    },
    "mode": {
      "type": "string",
      "enum": ["eval", "exec"],
      "description": "eval (the default): the value of an expression; exec: the names the statements bind"
    }
  },
  "required": ["source"],
  "additionalProperties": false
}`

const evalPythonOutputSchema = `{
  "type": "object",
  "properties": {
    "value": {"description": "the value as JSON (mode exec: an object of the names bound)"},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "violations": {
      "type": "array",
      "description": "where the source breaks the profile",
      "items": {
        "type": "object",
        "properties": {
          "line": {"type": "integer"},
          "col": {"type": "integer"},
          "kind": {"type": "string"},
          "name": {"type": "string"},
          "message": {"type": "string"},
          "fix": {"type": "string", "description": "the rule line that would allow it, for the operator of the policy; absent when no eval- rule can"},
          "warning": {"type": "string", "description": "what the fix would open"}
        },
        "required": ["line", "col", "kind", "message"]
      }
    },
    "interrupted": {
      "type": "object",
      "description": "the budget that ended the evaluation",
      "properties": {
        "budget": {"type": "string", "description": "eval-timeout, eval-max-iterations, eval-max-call-depth, eval-max-alloc, memory, cpu, output (the profile's and the hard limits), or timeout (the server's)"},
        "limit": {"type": "string", "description": "the budget as a rule line (eval-timeout=2s)"},
        "message": {"type": "string"}
      },
      "required": ["budget", "limit"]
    },
    "exception": {
      "type": "object",
      "description": "the exception the code raised",
      "properties": {
        "class": {"type": "string"},
        "message": {"type": "string"},
        "traceback": {"type": "string"}
      },
      "required": ["class", "message"]
    },
    "refusals": {"type": "array", "items": ` + refusalSchema + `},
    "error": {"type": "string", "description": "why the evaluation could not run"}
  }
}`

// toolSchema is a schema and its resolved form, for validation.
type toolSchema struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

func mustSchema(text string) toolSchema {
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		panic(fmt.Sprintf("mcp: a tool schema does not parse: %v", err))
	}
	r, err := s.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: a tool schema does not resolve: %v", err))
	}
	return toolSchema{schema: &s, resolved: r}
}

// decodeArgs validates the arguments of a call against the input schema, then
// decodes them into v (a struct whose fields carry the same JSON names).
func (ts toolSchema) decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	// Numbers are kept as written, then made float64 for the schema: a number
	// past float64 (an int of 400 digits in names) is still a number to it,
	// and its exact value is decoded later.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic map[string]any
	if err := dec.Decode(&generic); err != nil {
		return fmt.Errorf("the arguments are not a JSON object: %w", err)
	}
	if err := ts.resolved.Validate(schemaNumbers(generic)); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// schemaNumbers replaces, in place, each json.Number of v by a float64 (the
// largest finite one of its sign when it is past float64), which is what the
// schema checks.
func schemaNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !math.IsInf(f, 0) {
			return 0.0
		}
		if math.IsInf(f, 0) {
			f = math.Copysign(math.MaxFloat64, f)
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = schemaNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = schemaNumbers(e)
		}
	}
	return v
}
