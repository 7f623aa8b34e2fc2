package evalguard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pysandboxes/pysandboxes/policy"
)

// State tells how eval, exec and compile behave under a policy: the three states of
// policy.EvalState.
type State = policy.EvalState

// The states of the guard.
const (
	// Refused: the policy has no default eval profile and does not allow
	// dynamic-code: eval, exec and compile are refused.
	Refused = policy.EvalRefused
	// Guarded: the policy declares the default eval profile (an eval-* line
	// without a :name suffix): sources are checked, rewritten and run under it.
	Guarded = policy.EvalGuarded
	// Unguarded: python-api=ALLOW:dynamic-code (the escape hatch): no guard. A
	// policy holding both eval-* rules and that grant is refused when it loads.
	Unguarded = policy.EvalUnguarded
)

// StateOf returns the state of the guard under p (Refused for a nil policy).
func StateOf(p *policy.Policy) State { return p.Eval().State() }

// Namespace is eval-namespace: how a namespace supplied by the caller is treated.
type Namespace string

// The namespace modes.
const (
	// Adaptive honours the globals a caller supplies (used in place by the
	// patched builtins; a __builtins__ they hold is kept) but never CPython's
	// automatic injection of every builtin.
	Adaptive Namespace = "adaptive"
	// Closed ignores the caller's globals: the namespace is the builtins granted
	// by eval-call, the guard's helpers and the names given by the host.
	Closed Namespace = "closed"
	// Caller runs the source with the raw builtins: no check, no rewrite, no
	// budgets (debugging only).
	Caller Namespace = "caller"
)

// NameRules is the effective value of one eval-* list key: the names and '*'
// patterns it allows and denies (deny wins). Syntax groups are already expanded
// into node classes and the core nodes added; attribute groups (str-methods...)
// stay group names, expanded by the interpreter; the implicit denials (format and
// format_map unless allowed by their exact name) are in Deny.
type NameRules struct {
	Allow []string
	Deny  []string
}

func (r NameRules) python() map[string]any {
	return map[string]any{"allow": strList(r.Allow), "deny": strList(r.Deny)}
}

func strList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Profile is one eval profile, as the guard applies it.
type Profile struct {
	// Name is "" for the default profile.
	Name string
	// Syntax (ast node classes), Call (callable names, and the builtins of the
	// namespace), Attribute (ordinary attribute names), Import (module names)
	// and Magic (dunder names).
	Syntax, Call, Attribute, Import, Magic NameRules
	// Namespace is eval-namespace.
	Namespace Namespace
	// Timeout is eval-timeout: the wall-clock budget of one evaluation, checked
	// by the runtime helpers (a blocking C call is only stopped by the sandbox's
	// own kill).
	Timeout time.Duration
	// MaxIterations (loop bodies and comprehension items), MaxCallDepth (nested
	// calls of functions defined by the code), MaxDepth (static AST nesting),
	// MaxNodes (static AST node count) and MaxAlloc (bytes, checked before the
	// rewritten operators and the allocating methods run).
	MaxIterations, MaxCallDepth, MaxDepth, MaxNodes, MaxAlloc int64
	// MaxLeakedThreads is eval-max-leaked-threads. The guard runs evaluations
	// on the caller's thread and never leaves a worker thread behind, so the
	// value is carried but has nothing to count.
	MaxLeakedThreads int
}

// NewProfile returns the profile of a policy's eval profile.
func NewProfile(ep *policy.EvalProfile) *Profile {
	rules := func(s policy.NameSet) NameRules {
		a, d := s.Expanded()
		return NameRules{Allow: a, Deny: d}
	}
	return &Profile{
		Name:             ep.Name,
		Syntax:           rules(ep.Syntax),
		Call:             rules(ep.Call),
		Attribute:        rules(ep.Attribute),
		Import:           rules(ep.Import),
		Magic:            rules(ep.Magic),
		Namespace:        Namespace(ep.Namespace),
		Timeout:          ep.Timeout,
		MaxIterations:    ep.MaxIterations,
		MaxCallDepth:     ep.MaxCallDepth,
		MaxDepth:         ep.MaxDepth,
		MaxNodes:         ep.MaxNodes,
		MaxAlloc:         ep.MaxAlloc,
		MaxLeakedThreads: ep.MaxLeakedThreads,
	}
}

// DefaultProfile returns a declared profile holding the defaults of every key: the
// core nodes as the only syntax, nothing else allowed, the default budgets.
func DefaultProfile() *Profile { return NewProfile(policy.DefaultEvalProfile()) }

// UnknownProfileError reports a profile the policy does not declare. There is
// never a fallback to the default profile.
type UnknownProfileError struct {
	// Name is the profile asked for ("" for the default one).
	Name string
	// Known are the declared profiles, sorted ("" is the default one).
	Known []string
	// State is the state of the guard under the policy.
	State State
}

func (e *UnknownProfileError) Error() string {
	if e.Name == "" {
		switch e.State {
		case Unguarded:
			return "evalguard: the policy declares no default eval profile: python-api=ALLOW:dynamic-code lets eval, exec and compile run unguarded"
		default:
			return "evalguard: the policy declares no default eval profile (no eval-* line without a :name suffix): eval, exec and compile are refused; declare one, for example eval-syntax=arith"
		}
	}
	known := make([]string, len(e.Known))
	for i, n := range e.Known {
		known[i] = profileLabel(n)
	}
	list := strings.Join(known, ", ")
	if list == "" {
		list = "none"
	}
	return fmt.Sprintf("evalguard: unknown eval profile %q; declared profiles: %s", e.Name, list)
}

func profileLabel(n string) string {
	if n == "" {
		return "default"
	}
	return n
}

// FromPolicy returns the eval profile name of p ("" is the default profile). A
// profile the policy does not declare gives an *UnknownProfileError.
func FromPolicy(p *policy.Policy, name string) (*Profile, error) {
	ev := p.Eval()
	ep, ok := ev.Profile(name)
	if !ok {
		return nil, &UnknownProfileError{Name: name, Known: ev.Names(), State: ev.State()}
	}
	return NewProfile(ep), nil
}

// Rule returns the rule line setting key to value in this profile: eval-call=len,
// or eval-call:calc=len for the profile named calc.
func (p *Profile) Rule(key, value string) string {
	if p.Name != "" {
		key += ":" + p.Name
	}
	return key + "=" + value
}

// SourceRef is the file name the guard gives the code it runs under the profile:
// <eval:default> or <eval:NAME>.
func (p *Profile) SourceRef() string { return "<eval:" + profileLabel(p.Name) + ">" }

// Validate reports a profile the Python side would refuse (useful for a profile
// built by hand rather than by NewProfile).
func (p *Profile) Validate() error {
	if p == nil {
		return fmt.Errorf("evalguard: nil profile")
	}
	if !slices.Contains([]Namespace{Adaptive, Closed, Caller}, p.Namespace) {
		return fmt.Errorf("evalguard: profile %s: unknown namespace mode %q, expected adaptive, closed or caller", profileLabel(p.Name), p.Namespace)
	}
	if p.Timeout <= 0 {
		return fmt.Errorf("evalguard: profile %s: the timeout must be positive", profileLabel(p.Name))
	}
	for _, c := range []struct {
		key string
		v   int64
	}{{"eval-max-iterations", p.MaxIterations}, {"eval-max-call-depth", p.MaxCallDepth}, {"eval-max-depth", p.MaxDepth},
		{"eval-max-nodes", p.MaxNodes}, {"eval-max-alloc", p.MaxAlloc}, {"eval-max-leaked-threads", int64(p.MaxLeakedThreads)}} {
		if c.v < 0 {
			return fmt.Errorf("evalguard: profile %s: %s is negative", profileLabel(p.Name), c.key)
		}
	}
	for _, r := range []struct {
		key string
		r   NameRules
	}{{"eval-syntax", p.Syntax}, {"eval-call", p.Call}, {"eval-attribute", p.Attribute}, {"eval-import", p.Import}, {"eval-magic", p.Magic}} {
		for _, t := range append(slices.Clone(r.r.Allow), r.r.Deny...) {
			if t == "" {
				return fmt.Errorf("evalguard: profile %s: %s holds an empty name", profileLabel(p.Name), r.key)
			}
		}
	}
	return nil
}

// Python returns the profile as plain data (string keys; str, int, float, bool,
// list and dict values only), the form the Python side accepts as its profile
// (transport.Pickle encodes it):
//
//	{"v": 1, "name": str,
//	 "syntax"|"call"|"attribute"|"import"|"magic": {"allow": [str], "deny": [str]},
//	 "namespace": "adaptive"|"closed"|"caller", "timeout": float seconds,
//	 "max_iterations", "max_call_depth", "max_depth", "max_nodes", "max_alloc",
//	 "max_leaked_threads": int}
func (p *Profile) Python() map[string]any {
	return map[string]any{
		"v":                  int64(1),
		"name":               p.Name,
		"syntax":             p.Syntax.python(),
		"call":               p.Call.python(),
		"attribute":          p.Attribute.python(),
		"import":             p.Import.python(),
		"magic":              p.Magic.python(),
		"namespace":          string(p.Namespace),
		"timeout":            p.Timeout.Seconds(),
		"max_iterations":     p.MaxIterations,
		"max_call_depth":     p.MaxCallDepth,
		"max_depth":          p.MaxDepth,
		"max_nodes":          p.MaxNodes,
		"max_alloc":          p.MaxAlloc,
		"max_leaked_threads": int64(p.MaxLeakedThreads),
	}
}

// SourceCharsPerNode bounds the length of a source: at most this many characters
// per node allowed by eval-max-nodes (and at most eval-max-alloc). CPython builds
// the whole tree before it can be counted, and its memory grows with the source.
const SourceCharsPerNode = 32

// sizeViolation is the violation of a source longer than the profile accepts, or
// nil. The Python side applies the same rule; Go applies it first so that an
// oversized source never reaches an interpreter.
func (p *Profile) sizeViolation(chars int) *Violation {
	lim := SourceCharsPerNode * p.MaxNodes
	n := int64(chars)
	switch {
	case n > lim:
		need := (n + SourceCharsPerNode - 1) / SourceCharsPerNode
		return &Violation{Kind: "size", Name: "eval-max-nodes",
			Message: fmt.Sprintf("the source holds %d characters, more than %d (%d per node allowed by eval-max-nodes=%d)", n, lim, SourceCharsPerNode, p.MaxNodes),
			Fix:     p.Rule("eval-max-nodes", strconv.FormatInt(need, 10))}
	case n > p.MaxAlloc:
		return &Violation{Kind: "size", Name: "eval-max-alloc",
			Message: fmt.Sprintf("the source holds %d characters, more than eval-max-alloc=%d", n, p.MaxAlloc),
			Fix:     p.Rule("eval-max-alloc", strconv.FormatInt(n, 10))}
	}
	return nil
}
