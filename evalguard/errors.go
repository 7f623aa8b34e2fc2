package evalguard

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/pysandboxes/pysandboxes/transport"
)

// Violation is one place where a source breaks its eval profile.
type Violation struct {
	// Line and Col are 1-based (Col counts characters); both are 0 for a
	// violation of the whole source (its size, depth or node count).
	Line, Col int
	// Kind is what is refused:
	//	"syntax"    an ast node class eval-syntax does not allow (or a class pattern
	//	            with positional sub-patterns, or a keyword sub-pattern that
	//	            binds a name, which no rule allows)
	//	"call"      a call by name that eval-call does not allow
	//	"attribute" an ordinary attribute eval-attribute does not allow (a name
	//	            taken by from-import included), or an attribute assigned or
	//	            deleted (never allowed)
	//	"magic"     a dunder name (attribute or identifier) eval-magic does not allow
	//	"format"    a field of a literal str.format template reading a refused name
	//	"import"    a module eval-import does not allow (for `import a.b`, a as
	//	            well), a module no rule grants (builtins, gc, ctypes...), a
	//	            relative or star import
	//	"frame"     frame capture (gi_frame, f_globals, tb_frame...) or the
	//	            evaluation's own machinery (__globals__, __code__, __closure__,
	//	            __builtins__): always refused
	//	"reserved"  an identifier with the guard's reserved prefix __sb_
	//	"depth"     the source nests deeper than eval-max-depth, or than CPython's
	//	            parser can build
	//	"nodes"     the source holds more nodes than eval-max-nodes
	//	"size"      the source is longer than the profile accepts (see
	//	            SourceCharsPerNode)
	//	"parse"     the source is not valid Python for the mode
	//	"source"    the source is not valid text (a NUL character, a lone surrogate)
	Kind string
	// Name is what the violation is about: a node class, a name, a module, or the
	// rule key of a budget.
	Name string
	// Message says what is wrong.
	Message string
	// Fix is the rule line that allows it, ready to paste into a .py-sandboxes
	// file (for example "eval-syntax=loop (or, narrower: eval-syntax=While)"), or
	// "" when no rule can allow it.
	Fix string
	// Warning, when set, says what the fix would open.
	Warning string
}

func (v Violation) String() string {
	var b strings.Builder
	if v.Line > 0 {
		fmt.Fprintf(&b, "line %d, col %d: ", v.Line, v.Col)
	}
	b.WriteString(v.Message)
	if v.Fix != "" {
		b.WriteString(" (add: " + v.Fix + ")")
	} else {
		b.WriteString(" (no eval- rule allows it)")
	}
	if v.Warning != "" {
		b.WriteString(" [warning: " + v.Warning + "]")
	}
	return b.String()
}

// Verdict is the result of Check: OK when the source passes its profile (it parsed,
// passed every rule, was rewritten and compiled), else every violation, sorted by
// position.
type Verdict struct {
	OK         bool
	Violations []Violation
}

// Err returns nil for an accepted source, else a *RejectedError.
func (v *Verdict) Err() error {
	if v == nil || v.OK {
		return nil
	}
	return &RejectedError{Violations: v.Violations}
}

// RejectedError reports a source its profile refuses: every violation at once.
type RejectedError struct {
	Violations []Violation
	// SourceRef is the source's name (<eval:default>, <eval:NAME>), when known.
	SourceRef string
	// Report is the report the Python side rendered, when the error came from
	// there (it quotes the source lines).
	Report string
}

func (e *RejectedError) Error() string {
	n := len(e.Violations)
	if n == 0 {
		if e.Report != "" {
			return "evalguard: " + e.Report
		}
		return "evalguard: the source is rejected"
	}
	var b strings.Builder
	where := ""
	if e.SourceRef != "" {
		where = " in " + e.SourceRef
	}
	fmt.Fprintf(&b, "evalguard: %d rule%s violated%s", n, plural(n), where)
	for _, v := range e.Violations {
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// InterruptedError reports an evaluation stopped by one of its budgets.
type InterruptedError struct {
	// Budget is the rule key of the exhausted budget: "eval-timeout",
	// "eval-max-iterations", "eval-max-call-depth" or "eval-max-alloc".
	Budget string
	// Limit is its value: seconds (float64) for eval-timeout, else an int64.
	Limit any
	// Message is the guard's message.
	Message string
}

func (e *InterruptedError) Error() string {
	if e.Message != "" {
		return "evalguard: " + e.Message
	}
	return fmt.Sprintf("evalguard: evaluation interrupted: %s=%v exhausted", e.Budget, e.Limit)
}

// Rule names the exhausted budget as a rule line: "eval-timeout=2s",
// "eval-max-iterations=1000", "memory=536870912 bytes", "cpu=1s"; the bare
// budget name when the limit is unknown.
func (e *InterruptedError) Rule() string {
	switch l := e.Limit.(type) {
	case nil:
		return e.Budget
	case float64:
		if e.Budget == "eval-timeout" {
			return fmt.Sprintf("%s=%gs", e.Budget, l)
		}
		return fmt.Sprintf("%s=%g", e.Budget, l)
	case int64:
		switch e.Budget {
		case "memory", "output":
			return fmt.Sprintf("%s=%d bytes", e.Budget, l)
		case "cpu":
			return fmt.Sprintf("%s=%ds", e.Budget, l)
		}
		return fmt.Sprintf("%s=%d", e.Budget, l)
	}
	return fmt.Sprintf("%s=%v", e.Budget, e.Limit)
}

// DeniedError reports a refusal at run time: an attribute read through getattr, a
// template field or a helper that resolves names from strings, a refused builtin
// (setattr, globals(), type(name, bases, dict), help(), ...), a write into an
// object the application supplied, a module (imported or reached otherwise), a
// refused helper.
type DeniedError struct {
	// Message is the guard's message.
	Message string
	// Target is what was refused (a name, a module).
	Target string
	// Rule is the rule key that decides it ("eval-attribute", "eval-magic", ...),
	// "" when none does.
	Rule string
	// Kind is the kind of violation (see Violation.Kind; at run time "magic" and
	// "syntax" also name a special method a class defines, and the class
	// definition, by whatever built the class), or one of the run-time kinds:
	//	"import"  a module reached by any route (an attribute, a from-import,
	//	          what a call returns, sys.modules...) that eval-import does not
	//	          allow (Rule "eval-import"), or that no rule grants (Rule "")
	//	"write"   a write into an object the evaluation did not make (the
	//	          application's data, a module's registry such as sys.path, what a
	//	          library handed back): a subscript store or delete, an augmented
	//	          assignment or a container method that would change it in place,
	//	          operator.setitem and the like; or a change of a class, a module
	//	          or a function it did not make (functools.total_ordering,
	//	          update_wrapper, ABCMeta.register...) (no rule allows it)
	//	"helper"  a helper that resolves names or source from strings, or that
	//	          changes process-wide state (sys.setrecursionlimit,
	//	          atexit.register, signal.signal...), and that no rule allows
	//	          (pickle.loads, inspect.getmembers, typing's string types, a
	//	          string annotation, types.FunctionType...)
	//	"code"    a code object the guard did not produce
	Kind string
	// Fix is the rule line that allows it, "" when no rule can.
	Fix string
}

func (e *DeniedError) Error() string { return "evalguard: " + e.Message }

// SourceError reports a source Go refuses before any interpreter sees it.
type SourceError struct {
	// Offset is the byte offset of the problem.
	Offset int
	// Reason says what is wrong.
	Reason string
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("evalguard: invalid source at byte %d: %s", e.Offset, e.Reason)
}

// FromRemote returns the error of an exception raised by the guard in a Python
// process, from its descriptor: the module and qualified name of its class, its
// message, and args as Module's describe() gives them (Rejected: [violations,
// source_ref]; Interrupted: [budget, limit, message]; Denied: [message, target,
// rule, kind, fix]), decoded by transport.Unpickle or encoding/json. Args may be
// nil (only the message is known). It returns nil when the exception is not one of
// the guard's.
func FromRemote(module, qualname, message string, args []any) error {
	if module != Module {
		return nil
	}
	switch qualname {
	case "Rejected":
		e := &RejectedError{Report: message}
		if len(args) > 0 {
			if list, ok := asList(args[0]); ok {
				for _, it := range list {
					if v, ok := violationOf(it); ok {
						e.Violations = append(e.Violations, v)
					}
				}
			}
		}
		if len(args) > 1 {
			e.SourceRef, _ = args[1].(string)
		}
		return e
	case "Interrupted":
		e := &InterruptedError{Message: message}
		if len(args) > 0 {
			e.Budget, _ = args[0].(string)
		}
		if len(args) > 1 {
			e.Limit = number(args[1])
		}
		if len(args) > 2 {
			if m, ok := args[2].(string); ok && m != "" {
				e.Message = m
			}
		}
		if e.Budget == "" {
			// Only the message: "evaluation interrupted: <key>=<limit> exhausted..."
			if rest, ok := strings.CutPrefix(message, "evaluation interrupted: "); ok {
				if k, v, ok := strings.Cut(rest, "="); ok {
					e.Budget = k
					if f := strings.Fields(v); len(f) > 0 {
						e.Limit = number(strings.TrimSuffix(f[0], "s"))
					}
				}
			}
		}
		if e.Budget == "eval-timeout" {
			switch n := e.Limit.(type) {
			case int64:
				e.Limit = float64(n)
			case string:
				if f, err := strconv.ParseFloat(n, 64); err == nil {
					e.Limit = f
				}
			}
		}
		return e
	case "Denied":
		e := &DeniedError{Message: message}
		fields := []*string{&e.Message, &e.Target, &e.Rule, &e.Kind, &e.Fix}
		for i, a := range args {
			if i >= len(fields) {
				break
			}
			if s, ok := a.(string); ok && (i > 0 || s != "") {
				*fields[i] = s
			}
		}
		return e
	}
	return nil
}

// asList accepts the list forms of the decoders ([]any, transport.Tuple).
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case transport.Tuple:
		return x, true
	}
	return nil, false
}

// field reads key of a dict (map[string]any from encoding/json, transport.Dict
// from transport.Unpickle).
func field(d any, key string) (any, bool) {
	switch x := d.(type) {
	case map[string]any:
		v, ok := x[key]
		return v, ok
	case transport.Dict:
		for _, p := range x {
			if k, _ := p.Key.(string); k == key {
				return p.Value, true
			}
		}
	}
	return nil, false
}

func violationOf(d any) (Violation, bool) {
	if _, ok := field(d, "kind"); !ok {
		return Violation{}, false
	}
	str := func(k string) string {
		v, _ := field(d, k)
		s, _ := v.(string)
		return s
	}
	num := func(k string) int {
		v, _ := field(d, k)
		switch n := number(v).(type) {
		case int64:
			return int(n)
		case float64:
			return int(n)
		}
		return 0
	}
	return Violation{Line: num("line"), Col: num("col"), Kind: str("kind"), Name: str("name"), Message: str("message"),
		Fix: str("fix"), Warning: str("warning")}, true
}

// number normalises the numbers of the decoders: int64 for integers (a float64
// holding a whole number, as encoding/json gives, included), float64 otherwise.
func number(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case float64:
		if n == float64(int64(n)) && n < 1<<53 && n > -(1<<53) {
			return int64(n)
		}
		return n
	case *big.Int:
		if n.IsInt64() {
			return n.Int64()
		}
		f, _ := new(big.Float).SetInt(n).Float64()
		return f
	case string:
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return i
		}
	}
	return v
}
