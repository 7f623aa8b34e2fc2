package policy

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The eval-* family: a whitelisted sub-language for the source strings that reach
// eval, exec and compile. Each line is eval-<key>[:<profile>]=<value>; this file
// validates and stores the profiles, and the Python-side checker enforces them.
//
// Decisions taken where the reference is silent:
//   - A profile name is an ASCII identifier; "default" is reserved, because the
//     profile without a suffix is reported as <eval:default>.
//   - Tokens are ASCII: Python normalizes identifiers (NFKC), so a rule spelled with
//     other characters could silently differ from the name the interpreter sees.
//   - '*' may appear several times in a pattern; it matches any text, and the match
//     covers the whole name (as env= patterns).
//   - A wholly empty value is an "empty target" error, as an empty token is.
//   - A dunder token on eval-attribute, and an ordinary name on eval-magic, are errors
//     (each would be inert: the runtime gate sends dunders to eval-magic only).
//   - eval-call takes plain names only: a '-' (a category) or a '.' is an error.
//   - eval-import names modules: paths and relative names are errors.
//   - eval-import without eval-syntax=import in the same profile is a warning (the
//     grant is inert: import statements stay refused), not an error.
//   - The width warning is given for allow patterns only: a wide deny only narrows.
//   - format/format_map and the frame attributes are implicit denies of
//     eval-attribute only (the builtin format() is a different thing).
//   - A scalar value given by code or on the command line (<arg>) wins over a file's,
//     like the other single-valued keys; twice in the files, or twice as <arg>, is an
//     error naming the earlier line.
//   - Sizes are whole numbers of bytes, KB, MB or GB; durations take lowercase
//     suffixes (ms, s, m). Bounds: see evalScalars.
//   - State is EvalGuarded when the default profile is declared (named profiles alone
//     do not arm the patched builtins). A python-api rule allowing builtins.eval,
//     builtins.exec or builtins.compile together with any eval-* line is an error.

// EvalState tells how eval, exec and compile behave under a policy.
type EvalState int

const (
	// EvalRefused: no default eval profile and no python-api=ALLOW:dynamic-code;
	// eval, exec and compile are refused.
	EvalRefused EvalState = iota
	// EvalGuarded: the default profile is declared (at least one eval-* line without
	// a :profile suffix); sources are parsed, validated, rewritten and run under budget.
	EvalGuarded
	// EvalUnguarded: python-api allows builtins.eval (python-api=ALLOW:dynamic-code):
	// the escape hatch, no guard at all.
	EvalUnguarded
)

func (s EvalState) String() string {
	switch s {
	case EvalRefused:
		return "refused"
	case EvalGuarded:
		return "guarded"
	case EvalUnguarded:
		return "unguarded"
	}
	return "EvalState(" + strconv.Itoa(int(s)) + ")"
}

// The list keys and the scalar keys of the eval-* family.
const (
	evalSyntaxKey    = "eval-syntax"
	evalCallKey      = "eval-call"
	evalAttributeKey = "eval-attribute"
	evalImportKey    = "eval-import"
	evalMagicKey     = "eval-magic"

	evalNamespaceKey = "eval-namespace"
	evalTimeoutKey   = "eval-timeout"
	evalAllocKey     = "eval-max-alloc"
	evalLeakedKey    = "eval-max-leaked-threads"
)

var evalListKeys = []string{evalSyntaxKey, evalCallKey, evalAttributeKey, evalImportKey, evalMagicKey}

// evalScalar describes a scalar key: its kind, and the bounds of its value (in
// bytes, counts, or milliseconds for the timeout).
type evalScalar struct {
	key      string
	kind     byte // 'n' namespace, 'd' duration, 's' size, 'c' count
	min, max int64
}

var evalScalars = []evalScalar{
	{evalNamespaceKey, 'n', 0, 0},
	{evalTimeoutKey, 'd', 1, 24 * 60 * 60 * 1000},
	{"eval-max-iterations", 'c', 0, 1_000_000_000_000},
	{"eval-max-call-depth", 'c', 0, 1_000_000},
	{"eval-max-depth", 'c', 1, 1_000_000},
	{"eval-max-nodes", 'c', 1, 1_000_000_000},
	{evalAllocKey, 's', 0, 1_000_000_000_000_000},
	{evalLeakedKey, 'c', 1, 10_000},
}

// evalNamespaces are the values of eval-namespace.
var evalNamespaces = []string{"adaptive", "closed", "caller"}

const evalReserved = "__sb_"

// NameSet is the resolved value of one eval-* list key: an allow set and a deny set,
// each holding exact names, '*' patterns (a '*' matches any text, the match covers
// the whole name) and group names. Deny always wins. The zero value allows nothing.
type NameSet struct {
	key         string
	allow, deny []string // tokens as written, sorted, unique
	// Effective sets: syntax groups expanded, core nodes added to the eval-syntax
	// allow set, implicit denials added (eval-attribute: format, format_map unless
	// exactly allowed, and the frame attributes).
	allowExact, denyExact map[string]bool
	allowPat, denyPat     []string
	// Attribute groups: their members are only known to the interpreter.
	allowGroups, denyGroups []string
}

// Allows reports whether name is granted: false when the name is denied (exactly or
// by a pattern), uses the reserved prefix __sb_, or is a frame attribute
// (eval-attribute); else true when the name is allowed exactly or by a pattern.
//
// Groups are expanded for eval-syntax only. The members of the eval-attribute groups
// (str-methods, ...) are computed by the interpreter, so Allows ignores them: a name
// granted only through such a group reads false, and a name denied only through one
// reads as if the group were absent. The Python-side checker, which expands them, is
// the judge; see Allow, Deny and Expanded.
func (s NameSet) Allows(name string) bool {
	if strings.HasPrefix(name, evalReserved) {
		return false
	}
	if s.key == evalAttributeKey && evalFrameSet[name] {
		return false
	}
	if s.denyExact[name] {
		return false
	}
	for _, p := range s.denyPat {
		if starMatch(p, name) {
			return false
		}
	}
	if s.allowExact[name] {
		return true
	}
	for _, p := range s.allowPat {
		if starMatch(p, name) {
			return true
		}
	}
	return false
}

// Allow returns the allow tokens as written in the rules (exact names, patterns and
// group names, groups not expanded), sorted and without duplicates. Implicit entries
// (core nodes) are not included: see Expanded.
func (s NameSet) Allow() []string { return slices.Clone(s.allow) }

// Deny returns the deny tokens as written in the rules (from DENY: lines), sorted and
// without duplicates. Implicit denials are not included: see Expanded.
func (s NameSet) Deny() []string { return slices.Clone(s.deny) }

// Expanded returns the effective sets, sorted, as the Python-side checker needs them:
// exact names and patterns, with the eval-syntax groups expanded into node names, the
// core nodes in the eval-syntax allow set, and the implicit denials of eval-attribute
// (format and format_map unless allowed by their exact name, and the frame
// attributes) in its deny set. The eval-attribute groups stay as group names (they
// contain a '-', so they never collide with a name), for the interpreter to expand.
func (s NameSet) Expanded() (allow, deny []string) {
	allow = evalSetUnion(s.allowExact, s.allowPat, s.allowGroups)
	deny = evalSetUnion(s.denyExact, s.denyPat, s.denyGroups)
	return allow, deny
}

func evalSetUnion(exact map[string]bool, lists ...[]string) []string {
	out := make([]string, 0, len(exact))
	for n := range exact {
		out = append(out, n)
	}
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// newEvalNameSet resolves the tokens of a list key.
func newEvalNameSet(key string, allow, deny map[string]bool) NameSet {
	s := NameSet{key: key, allowExact: map[string]bool{}, denyExact: map[string]bool{}}
	s.allow = evalSortedKeys(allow)
	s.deny = evalSortedKeys(deny)
	fill := func(tokens []string, exact map[string]bool, pats, groups *[]string) {
		for _, t := range tokens {
			switch {
			case strings.Contains(t, "*"):
				*pats = append(*pats, t)
			case key == evalSyntaxKey && evalSyntaxGroups[t] != nil:
				for _, n := range evalSyntaxGroups[t] {
					exact[n] = true
				}
			case key == evalAttributeKey && strings.Contains(t, "-"):
				*groups = append(*groups, t)
			default:
				exact[t] = true
			}
		}
	}
	fill(s.allow, s.allowExact, &s.allowPat, &s.allowGroups)
	fill(s.deny, s.denyExact, &s.denyPat, &s.denyGroups)
	switch key {
	case evalSyntaxKey:
		for _, n := range evalCoreNodes {
			s.allowExact[n] = true
		}
	case evalAttributeKey:
		for _, n := range []string{"format", "format_map"} {
			if !s.allowExact[n] {
				s.denyExact[n] = true
			}
		}
		for _, n := range evalFrameAttributes {
			s.denyExact[n] = true
		}
	}
	return s
}

func evalSortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// EvalProfile is one eval profile: the default one (Name "") or a named one
// (eval-<key>:<name>=...). A named profile is complete and independent: it inherits
// nothing from the default profile.
type EvalProfile struct {
	// Name is "" for the default profile.
	Name string
	// The list keys: eval-syntax (node classes; the core nodes are always allowed),
	// eval-call (callable names, and the builtins of the namespace), eval-attribute
	// (ordinary attribute names), eval-import (module names) and eval-magic (dunders).
	Syntax, Call, Attribute, Import, Magic NameSet
	// Namespace is eval-namespace: "adaptive" (default), "closed" or "caller".
	Namespace string
	// Timeout is eval-timeout (default 5s).
	Timeout time.Duration
	// MaxIterations (default 1_000_000), MaxCallDepth (20), MaxDepth (20, static AST
	// nesting), MaxNodes (5_000) and MaxAlloc (bytes, default 10MB = 10_000_000).
	MaxIterations, MaxCallDepth, MaxDepth, MaxNodes, MaxAlloc int64
	// MaxLeakedThreads is eval-max-leaked-threads (default 4).
	MaxLeakedThreads int
	// Rules are the eval-* lines of this profile that were accepted, in load order
	// (a file's scalar line overridden by the same key given as <arg> included).
	Rules []Rule
}

// DefaultEvalProfile returns a profile holding the defaults of every key: the core
// nodes as the only syntax, nothing else allowed, and the default budgets.
func DefaultEvalProfile() *EvalProfile {
	return &EvalProfile{
		Syntax:           newEvalNameSet(evalSyntaxKey, nil, nil),
		Call:             newEvalNameSet(evalCallKey, nil, nil),
		Attribute:        newEvalNameSet(evalAttributeKey, nil, nil),
		Import:           newEvalNameSet(evalImportKey, nil, nil),
		Magic:            newEvalNameSet(evalMagicKey, nil, nil),
		Namespace:        "adaptive",
		Timeout:          5 * time.Second,
		MaxIterations:    1_000_000,
		MaxCallDepth:     20,
		MaxDepth:         20,
		MaxNodes:         5_000,
		MaxAlloc:         10_000_000,
		MaxLeakedThreads: 4,
	}
}

func (p *EvalProfile) clone() *EvalProfile {
	c := *p
	c.Rules = slices.Clone(p.Rules)
	return &c
}

// EvalSyntaxGroups returns the eval-syntax groups and their ast node classes.
func EvalSyntaxGroups() map[string][]string {
	out := make(map[string][]string, len(evalSyntaxGroups))
	for g, nodes := range evalSyntaxGroups {
		out[g] = slices.Clone(nodes)
	}
	return out
}

// EvalCoreNodes returns the ast node classes every declared profile allows.
func EvalCoreNodes() []string { return slices.Clone(evalCoreNodes) }

// EvalAttributeGroups returns the names of the eval-attribute groups. Their members
// are the public names of builtin types, computed by the interpreter.
func EvalAttributeGroups() []string { return slices.Clone(evalAttributeGroups) }

// EvalFrameAttributes returns the attribute names that are always denied: no rule
// grants them, not even eval-attribute=*.
func EvalFrameAttributes() []string { return slices.Clone(evalFrameAttributes) }

// EvalPolicy is the eval-* part of a policy: its state and its declared profiles.
type EvalPolicy struct {
	state    EvalState
	profiles map[string]*EvalProfile
	api      *Rule
}

// Eval returns the eval-* rules of the policy. It is never nil.
func (p *Policy) Eval() *EvalPolicy {
	if p == nil || p.eval == nil {
		return &EvalPolicy{}
	}
	return p.eval
}

// State tells how eval, exec and compile behave.
func (e *EvalPolicy) State() EvalState {
	if e == nil {
		return EvalRefused
	}
	return e.state
}

// APIRule returns the python-api rule that allows builtins.eval when State is
// EvalUnguarded, else nil.
func (e *EvalPolicy) APIRule() *Rule {
	if e == nil || e.api == nil {
		return nil
	}
	r := *e.api
	return &r
}

// Profile returns a copy of a declared profile ("" is the default profile). An
// undeclared name gives false: there is never a fallback to the default profile.
func (e *EvalPolicy) Profile(name string) (*EvalProfile, bool) {
	if e == nil {
		return nil, false
	}
	p, ok := e.profiles[name]
	if !ok {
		return nil, false
	}
	return p.clone(), true
}

// Names returns the declared profile names, sorted ("" first when declared).
func (e *EvalPolicy) Names() []string {
	if e == nil {
		return nil
	}
	out := make([]string, 0, len(e.profiles))
	for n := range e.profiles {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// evalLoad is the loading state of the eval-* family.
type evalLoad struct {
	profiles map[string]*evalBuild
	lines    []Rule // accepted lines, every profile, load order
}

// evalBuild accumulates one profile while loading.
type evalBuild struct {
	prof        *EvalProfile
	allow, deny map[string]map[string]bool // list key -> tokens
	set         map[string]Rule            // scalar key -> rule that set it
}

func (ld *loader) evalProfile(name string) *evalBuild {
	st := &ld.evalState
	if st.profiles == nil {
		st.profiles = map[string]*evalBuild{}
	}
	b := st.profiles[name]
	if b == nil {
		b = &evalBuild{prof: DefaultEvalProfile(), allow: map[string]map[string]bool{},
			deny: map[string]map[string]bool{}, set: map[string]Rule{}}
		b.prof.Name = name
		st.profiles[name] = b
	}
	return b
}

var evalProfileRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// evalRule validates one eval-* line and adds it to its profile.
func (ld *loader) evalRule(r Rule) {
	key, profile, named := strings.Cut(r.Key, ":")
	isList := slices.Contains(evalListKeys, key)
	var scalar *evalScalar
	for i := range evalScalars {
		if evalScalars[i].key == key {
			scalar = &evalScalars[i]
		}
	}
	if !isList && scalar == nil {
		known := append(slices.Clone(evalListKeys), evalScalarKeyNames()...)
		if m, ok := evalClosestMatch(key, known); ok {
			ld.errs.add(r.Ref, "Invalid rule '%s': unknown eval key '%s', closest known key is '%s'", r.Raw, key, m)
		} else {
			ld.errs.add(r.Ref, "Invalid rule '%s': unknown eval key '%s', expected one of %s", r.Raw, key, strings.Join(known, ", "))
		}
		return
	}
	if named {
		switch {
		case profile == "":
			ld.errs.add(r.Ref, "Invalid rule '%s': empty profile name after ':'", r.Raw)
			return
		case !evalProfileRE.MatchString(profile):
			ld.errs.add(r.Ref, "Invalid rule '%s': invalid profile name '%s': expected an identifier (ASCII letters, digits and '_', not starting with a digit)", r.Raw, profile)
			return
		case profile == "default":
			ld.errs.add(r.Ref, "Invalid rule '%s': the profile name 'default' is reserved for the profile without a suffix: write %s=...", r.Raw, key)
			return
		}
	}
	var warns []string
	var apply func(b *evalBuild) bool
	if isList {
		deny, tokens, ok := ld.evalTokens(r, key)
		if !ok {
			return
		}
		warns = evalListWarnings(key, deny, tokens)
		apply = func(b *evalBuild) bool {
			side := b.allow
			if deny {
				side = b.deny
			}
			if side[key] == nil {
				side[key] = map[string]bool{}
			}
			for _, t := range tokens {
				side[key][t] = true
			}
			return true
		}
	} else {
		set, ok := ld.evalScalarValue(r, *scalar)
		if !ok {
			return
		}
		if key == evalNamespaceKey && strings.TrimSpace(r.Value) == "caller" {
			warns = append(warns, "eval-namespace=caller runs evaluated code with the raw builtins: no validation, no rewrite and no budgets (for debugging only)")
		}
		apply = func(b *evalBuild) bool {
			if prev, dup := b.set[key]; dup {
				if prev.Ref.IsArg() && !r.Ref.IsArg() {
					ld.debug("rule overridden by <arg>", "rule", r.Raw, "at", r.Ref.String())
					return true
				}
				ld.errs.add(r.Ref, "Invalid rule '%s': %s is already set in %s by %s ('%s'): a scalar key takes one value per profile",
					r.Raw, key, evalProfileLabel(b.prof.Name), prev.Ref, prev.Raw)
				return false
			}
			b.set[key] = r
			set(b.prof)
			return true
		}
	}
	b := ld.evalProfile(profile)
	if !apply(b) {
		return
	}
	for _, w := range warns {
		ld.warn(r.Ref, "%s", w)
	}
	b.prof.Rules = append(b.prof.Rules, r)
	ld.evalState.lines = append(ld.evalState.lines, r)
	ld.record(r)
}

func evalScalarKeyNames() []string {
	out := make([]string, len(evalScalars))
	for i, s := range evalScalars {
		out[i] = s.key
	}
	return out
}

func evalProfileLabel(name string) string {
	if name == "" {
		return "the default profile"
	}
	return "profile '" + name + "'"
}

// evalTokens splits and checks the value of a list key. It reports every bad token.
func (ld *loader) evalTokens(r Rule, key string) (deny bool, tokens []string, ok bool) {
	v := strings.TrimSpace(r.Value)
	bad := func(format string, args ...any) {
		ld.errs.add(r.Ref, "Invalid rule '%s': "+format, append([]any{r.Raw}, args...)...)
		ok = false
	}
	ok = true
	switch upper := strings.ToUpper(v); {
	case strings.HasPrefix(v, "DENY:"):
		deny, v = true, v[len("DENY:"):]
	case strings.HasPrefix(upper, "DENY:"):
		bad("write the prefix as DENY: (in capitals)")
		return false, nil, false
	case strings.HasPrefix(upper, "ALLOW:"):
		bad("%s takes the names to allow as they are: remove the ALLOW: prefix", key)
		return false, nil, false
	}
	seen := map[string]bool{}
	for _, raw := range strings.Split(v, ",") {
		t := strings.TrimSpace(raw)
		switch {
		case t == "":
			bad("empty target")
			continue
		case strings.HasPrefix(strings.ToUpper(t), "DENY:"):
			bad("'%s': DENY: applies to a whole line: put it on a line of its own", t)
			continue
		case strings.HasPrefix(t, evalReserved):
			bad("'%s' uses the reserved prefix __sb_ of the guard's helpers: no rule can name it", t)
			continue
		}
		if msg := evalCheckToken(key, t, deny); msg != "" {
			bad("%s", msg)
			continue
		}
		if !seen[t] {
			seen[t] = true
			tokens = append(tokens, t)
		}
	}
	return deny, tokens, ok
}

// evalIdentPattern reports whether t is an ASCII identifier in which '*' may stand
// for any text.
func evalIdentPattern(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == '_' || c == '*' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func evalIsDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// evalCheckToken validates one token of a list key; it returns the problem, or "".
func evalCheckToken(key, t string, deny bool) string {
	pattern := strings.Contains(t, "*")
	switch key {
	case evalSyntaxKey:
		return evalCheckSyntax(t, pattern)
	case evalCallKey:
		switch {
		case strings.Contains(t, "-"):
			return fmt.Sprintf("'%s' is not a callable name: eval-call never takes categories (python-api=ALLOW:<category> does)", t)
		case strings.Contains(t, "."):
			return fmt.Sprintf("'%s' is not a plain callable name: eval-call names what code calls by a bare name (attributes are granted by eval-attribute)", t)
		case !evalIdentPattern(t):
			return fmt.Sprintf("invalid callable name '%s': expected a Python identifier or a '*' pattern", t)
		}
	case evalAttributeKey:
		switch {
		case strings.Contains(t, "-"):
			if slices.Contains(evalAttributeGroups, t) {
				return ""
			}
			if m, ok := evalClosestMatch(t, evalAttributeGroups); ok {
				return fmt.Sprintf("unknown attribute group '%s', closest known group is '%s'", t, m)
			}
			return fmt.Sprintf("unknown attribute group '%s', expected one of %s", t, strings.Join(evalAttributeGroups, ", "))
		case !evalIdentPattern(t):
			return fmt.Sprintf("invalid attribute name '%s': expected a Python identifier, a '*' pattern or a group", t)
		case !pattern && evalIsDunder(t):
			return fmt.Sprintf("'%s' is a dunder name: dunder names are granted by eval-magic, not eval-attribute", t)
		case !pattern && !deny && evalFrameSet[t]:
			return fmt.Sprintf("'%s' is a frame attribute: frame capture is always refused and no eval- rule grants it", t)
		}
	case evalImportKey:
		switch {
		case strings.ContainsAny(t, `/\`) || strings.HasSuffix(t, ".py"):
			return fmt.Sprintf("'%s' is a path: eval-import takes module names (such as json or xml.etree), never paths", t)
		case strings.HasPrefix(t, "."):
			return fmt.Sprintf("'%s' is a relative module name: name the module in full", t)
		}
		for _, part := range strings.Split(t, ".") {
			if !evalIdentPattern(part) {
				return fmt.Sprintf("invalid module name '%s': expected dotted Python identifiers, '*' allowed", t)
			}
		}
	case evalMagicKey:
		switch {
		case !evalIdentPattern(t):
			return fmt.Sprintf("invalid dunder name '%s': expected a name of the shape __x__ or a '*' pattern", t)
		case !pattern && !evalIsDunder(t):
			return fmt.Sprintf("'%s' is not a dunder name (__x__): eval-magic grants dunders, ordinary names belong to eval-attribute", t)
		case pattern && !evalCanMatchDunder(t):
			return fmt.Sprintf("pattern '%s' can never match a dunder name (__x__)", t)
		}
	}
	return ""
}

// evalCanMatchDunder reports whether a pattern can match some __x__ name: its fixed
// head and tail must agree with the leading and trailing "__".
func evalCanMatchDunder(p string) bool {
	head := p[:strings.Index(p, "*")]
	tail := p[strings.LastIndex(p, "*")+1:]
	return (strings.HasPrefix(head, "__") || strings.HasPrefix("__", head)) &&
		(strings.HasSuffix(tail, "__") || strings.HasSuffix("__", tail))
}

func evalCheckSyntax(t string, pattern bool) string {
	switch {
	case pattern:
		return fmt.Sprintf("'%s': patterns are not allowed on eval-syntax (a closed vocabulary): name a group or an ast node class", t)
	case evalSyntaxGroups[t] != nil || evalNodeSet[t]:
		return ""
	case evalRemovedNodes[t] != "":
		return fmt.Sprintf("'%s' is %s", t, evalRemovedNodes[t])
	case slices.Contains(evalAbstractNodes, t):
		return fmt.Sprintf("'%s' is an abstract ast class: name the concrete node classes", t)
	case slices.Contains(evalASTHelpers, t):
		return fmt.Sprintf("'%s' is a helper of the ast module, not a node class", t)
	}
	if m, ok := evalClosestMatch(t, evalSyntaxVocab); ok {
		return fmt.Sprintf("unknown syntax token '%s', closest known token is '%s'", t, m)
	}
	return fmt.Sprintf("unknown syntax token '%s': expected a group (%s) or an ast node class name", t, strings.Join(evalSortedKeys(evalMapKeys(evalSyntaxGroups)), ", "))
}

func evalMapKeys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// evalHierarchyDunders open the type hierarchy or a frame's world when granted.
var evalHierarchyDunders = []string{
	"__base__", "__bases__", "__builtins__", "__class__", "__closure__", "__code__",
	"__dict__", "__func__", "__getattribute__", "__globals__", "__mro__", "__reduce__",
	"__reduce_ex__", "__self__", "__subclasses__",
}

// evalListWarnings returns the parse-time warnings of an accepted list line.
func evalListWarnings(key string, deny bool, tokens []string) []string {
	if deny {
		return nil
	}
	var out []string
	matching := func(p string, names []string) []string {
		var m []string
		for _, n := range names {
			if starMatch(p, n) {
				m = append(m, n)
			}
		}
		slices.Sort(m)
		return m
	}
	for _, t := range tokens {
		pattern := strings.Contains(t, "*")
		if pattern {
			if fixed := strings.ReplaceAll(t, "*", ""); len(fixed) < 3 {
				out = append(out, fmt.Sprintf("%s pattern '%s' has a fixed part of %s: it may match many names (the interpreter's names cannot be counted when the rules are loaded; prefer exact names)", key, t, evalPlural(len(fixed), "character")))
			}
		}
		switch key {
		case evalCallKey:
			if !pattern {
				if reason, ok := evalSensitiveCalls[t]; ok {
					out = append(out, fmt.Sprintf("eval-call=%s adds the sensitive builtin '%s' to the namespace of evaluated code: %s", t, t, reason))
				} else if evalBuiltinSet[t] {
					out = append(out, fmt.Sprintf("eval-call=%s adds the builtin '%s' to the namespace of evaluated code", t, t))
				}
				continue
			}
			if s := matching(t, evalSortedKeys(evalMapKeys(evalSensitiveCalls))); len(s) > 0 {
				out = append(out, fmt.Sprintf("eval-call pattern '%s' adds sensitive builtins to the namespace of evaluated code: %s", t, strings.Join(s, ", ")))
			} else if b := matching(t, evalBuiltins); len(b) > 0 {
				out = append(out, fmt.Sprintf("eval-call pattern '%s' adds builtins to the namespace of evaluated code: %s", t, strings.Join(b, ", ")))
			}
		case evalAttributeKey:
			if t == "format" || t == "format_map" {
				out = append(out, fmt.Sprintf("eval-attribute=%s grants str.%s: every field of its templates is checked against the eval-attribute and eval-magic rules at run time; an f-string is the safer choice", t, t))
			}
		case evalMagicKey:
			m := matching(t, evalHierarchyDunders)
			switch {
			case len(m) == 0:
			case !pattern:
				out = append(out, fmt.Sprintf("eval-magic=%s opens the whole type hierarchy to evaluated code", t))
			default:
				out = append(out, fmt.Sprintf("eval-magic pattern '%s' grants %s, which open the whole type hierarchy to evaluated code", t, strings.Join(m, ", ")))
			}
		}
	}
	return out
}

var (
	evalIntRE   = regexp.MustCompile(`^[0-9]+(_[0-9]+)*$`)
	evalFloatRE = regexp.MustCompile(`^(?:[0-9]+(?:_[0-9]+)*(?:\.(?:[0-9]+(?:_[0-9]+)*)?)?|\.[0-9]+(?:_[0-9]+)*)$`)
)

// evalScalarValue parses the value of a scalar key; it returns the setter of the
// profile field, or false after reporting the problem.
func (ld *loader) evalScalarValue(r Rule, s evalScalar) (func(*EvalProfile), bool) {
	v := strings.TrimSpace(r.Value)
	fail := func(format string, args ...any) (func(*EvalProfile), bool) {
		ld.errs.add(r.Ref, "Invalid rule '%s': "+format, append([]any{r.Raw}, args...)...)
		return nil, false
	}
	switch {
	case strings.Contains(strings.ToUpper(v), "DENY:") || strings.Contains(v, "*"):
		return fail("DENY: and '*' patterns apply to list keys only")
	case strings.Contains(v, ","):
		return fail("%s takes a single value", s.key)
	}
	if s.kind == 'n' {
		if !slices.Contains(evalNamespaces, v) {
			return fail("unknown mode '%s', expected one of ['%s']", v, strings.Join(evalNamespaces, "', '"))
		}
		return func(p *EvalProfile) { p.Namespace = v }, true
	}
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '_' || v[i] == '.') {
		i++
	}
	num, suffix := v[:i], strings.TrimSpace(v[i:])
	durSuffix := suffix == "ms" || suffix == "s" || suffix == "m"
	sizeSuffix := slices.Contains([]string{"kb", "mb", "gb"}, strings.ToLower(suffix))
	const durHelp = "a duration (a number with ms, s or m; a bare number means seconds)"
	const sizeHelp = "a size (a whole number with KB, MB or GB; a bare number means bytes)"
	const countHelp = "a count (a whole number)"
	want := map[byte]string{'d': durHelp, 's': sizeHelp, 'c': countHelp}[s.kind]
	switch {
	case num == "" && suffix == "":
		return fail("%s takes %s, not an empty value", s.key, want)
	case s.kind != 'd' && durSuffix:
		return fail("'%s' is a duration suffix: %s takes %s", suffix, s.key, want)
	case s.kind != 's' && sizeSuffix:
		return fail("'%s' is a size suffix: %s takes %s", suffix, s.key, want)
	case suffix != "" && !(s.kind == 'd' && durSuffix) && !(s.kind == 's' && sizeSuffix):
		return fail("invalid value '%s': %s takes %s", v, s.key, want)
	}
	if s.kind == 'd' {
		if !evalFloatRE.MatchString(num) {
			return fail("invalid number '%s' ('_' goes between digits only): %s takes %s", num, s.key, want)
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(num, "_", ""), 64)
		if err != nil && !math.IsInf(f, 0) {
			return fail("invalid number '%s': %s takes %s", num, s.key, want)
		}
		unit := map[string]float64{"ms": 1, "": 1000, "s": 1000, "m": 60_000}[suffix]
		ms := f * unit
		switch {
		case ms < float64(s.min):
			return fail("%s is too short: the minimum is 1ms", s.key)
		case ms > float64(s.max) || math.IsInf(ms, 0) || math.IsNaN(ms):
			return fail("%s is too long: the maximum is %ds (24 hours)", s.key, s.max/1000)
		}
		d := time.Duration(math.Round(ms * float64(time.Millisecond)))
		return func(p *EvalProfile) { p.Timeout = d }, true
	}
	if !evalIntRE.MatchString(num) {
		if evalFloatRE.MatchString(num) {
			return fail("'%s' is not a whole number: %s takes %s", num, s.key, want)
		}
		return fail("invalid number '%s' ('_' goes between digits only): %s takes %s", num, s.key, want)
	}
	digits := strings.TrimLeft(strings.ReplaceAll(num, "_", ""), "0")
	mult := map[string]int64{"": 1, "kb": 1_000, "mb": 1_000_000, "gb": 1_000_000_000}[strings.ToLower(suffix)]
	var n int64
	if len(digits) > 18 {
		n = math.MaxInt64
	} else if digits != "" {
		n, _ = strconv.ParseInt(digits, 10, 64)
	}
	if n > s.max/mult {
		return fail("%s is too large: the maximum is %s", s.key, evalFormatCount(s.max, s.kind))
	}
	n *= mult
	if n < s.min {
		return fail("%s is too small: the minimum is %d", s.key, s.min)
	}
	switch s.key {
	case "eval-max-iterations":
		return func(p *EvalProfile) { p.MaxIterations = n }, true
	case "eval-max-call-depth":
		return func(p *EvalProfile) { p.MaxCallDepth = n }, true
	case "eval-max-depth":
		return func(p *EvalProfile) { p.MaxDepth = n }, true
	case "eval-max-nodes":
		return func(p *EvalProfile) { p.MaxNodes = n }, true
	case evalAllocKey:
		return func(p *EvalProfile) { p.MaxAlloc = n }, true
	default: // eval-max-leaked-threads
		return func(p *EvalProfile) { p.MaxLeakedThreads = int(n) }, true
	}
}

func evalPlural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// evalFormatCount renders a bound with '_' separators (sizes in GB when round).
func evalFormatCount(n int64, kind byte) string {
	if kind == 's' && n%1_000_000_000 == 0 {
		return evalUnderscore(n/1_000_000_000) + "GB"
	}
	return evalUnderscore(n)
}

func evalUnderscore(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte('_')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// finishEval resolves the profiles, checks eval-import against eval-syntax, and
// decides the state, refusing eval-* lines combined with a python-api rule that
// lets the dynamic-code builtins run unguarded.
func (ld *loader) finishEval() {
	st := &ld.evalState
	e := &EvalPolicy{profiles: map[string]*EvalProfile{}}
	names := evalSortedKeys(evalMapKeys(st.profiles))
	for _, name := range names {
		b := st.profiles[name]
		p := b.prof
		p.Syntax = newEvalNameSet(evalSyntaxKey, b.allow[evalSyntaxKey], b.deny[evalSyntaxKey])
		p.Call = newEvalNameSet(evalCallKey, b.allow[evalCallKey], b.deny[evalCallKey])
		p.Attribute = newEvalNameSet(evalAttributeKey, b.allow[evalAttributeKey], b.deny[evalAttributeKey])
		p.Import = newEvalNameSet(evalImportKey, b.allow[evalImportKey], b.deny[evalImportKey])
		p.Magic = newEvalNameSet(evalMagicKey, b.allow[evalMagicKey], b.deny[evalMagicKey])
		if len(p.Import.allow) > 0 && !p.Syntax.Allows("Import") && !p.Syntax.Allows("ImportFrom") {
			for _, r := range p.Rules {
				if k, _, _ := strings.Cut(r.Key, ":"); k == evalImportKey && !strings.HasPrefix(strings.TrimSpace(r.Value), "DENY:") {
					ld.warn(r.Ref, "eval-import has no effect without eval-syntax%s=import in %s: import statements stay refused", evalSuffix(name), evalProfileLabel(name))
					break
				}
			}
		}
		e.profiles[name] = p
	}
	if _, ok := e.profiles[""]; ok {
		e.state = EvalGuarded
	}
	var allowed []string
	var apiRule *Rule
	for _, q := range []string{"builtins.eval", "builtins.exec", "builtins.compile"} {
		ok, _, rule := ld.p.APIAllowed(q)
		if !ok {
			continue
		}
		allowed = append(allowed, q)
		if apiRule == nil && rule != nil {
			rr := *rule
			apiRule = &rr
		}
		if q == "builtins.eval" {
			e.state = EvalUnguarded
			e.api = apiRule
		}
	}
	if len(allowed) > 0 && len(st.lines) > 0 {
		what := "python-api"
		if apiRule != nil {
			what = fmt.Sprintf("'%s' (%s)", apiRule.Raw, apiRule.Ref)
		}
		lines := make([]string, len(st.lines))
		for i, r := range st.lines {
			lines[i] = fmt.Sprintf("'%s' (%s)", r.Raw, r.Ref)
		}
		ld.errs.add(st.lines[0].Ref, "eval-* rules conflict with %s, which lets %s run unguarded: keep either the guard or the escape hatch, not both; the eval-* rules are %s",
			what, evalJoinWords(allowed), strings.Join(lines, ", "))
	}
	ld.p.eval = e
}

func evalSuffix(name string) string {
	if name == "" {
		return ""
	}
	return ":" + name
}

// evalJoinWords joins words as "a, b and c".
func evalJoinWords(w []string) string {
	if len(w) <= 1 {
		return strings.Join(w, "")
	}
	return strings.Join(w[:len(w)-1], ", ") + " and " + w[len(w)-1]
}

// evalClosestMatch returns the best candidate as difflib.get_close_matches(word,
// candidates, n=1, cutoff=0.6) would: the highest SequenceMatcher ratio of at least
// 0.6, ties going to the greatest candidate. (difflib's autojunk heuristic only acts
// on words of 200 characters or more, which never reach the cutoff against the short
// names compared here, so it is left out.)
func evalClosestMatch(word string, candidates []string) (string, bool) {
	const cutoff = 0.6
	b := []rune(word)
	b2j := map[rune][]int{}
	for j, c := range b {
		b2j[c] = append(b2j[c], j)
	}
	best, bestScore := "", -1.0
	for _, x := range candidates {
		a := []rune(x)
		total := len(a) + len(b)
		if total == 0 {
			continue
		}
		if 2*float64(min(len(a), len(b)))/float64(total) < cutoff {
			continue // real_quick_ratio
		}
		if 2*float64(evalQuickMatches(a, b))/float64(total) < cutoff {
			continue // quick_ratio
		}
		score := 2 * float64(evalMatchingChars(a, b, b2j)) / float64(total)
		if score >= cutoff && (score > bestScore || score == bestScore && x > best) {
			best, bestScore = x, score
		}
	}
	return best, bestScore >= 0
}

// evalQuickMatches is the size of the multiset intersection of a and b.
func evalQuickMatches(a, b []rune) int {
	avail := map[rune]int{}
	for _, c := range b {
		avail[c]++
	}
	n := 0
	for _, c := range a {
		if avail[c] > 0 {
			avail[c]--
			n++
		}
	}
	return n
}

// evalMatchingChars sums the sizes of SequenceMatcher(None, a, b).get_matching_blocks().
func evalMatchingChars(a, b []rune, b2j map[rune][]int) int {
	type span struct{ alo, ahi, blo, bhi int }
	queue := []span{{0, len(a), 0, len(b)}}
	n := 0
	for len(queue) > 0 {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		i, j, k := evalLongestMatch(a, b2j, q.alo, q.ahi, q.blo, q.bhi)
		if k == 0 {
			continue
		}
		n += k
		if q.alo < i && q.blo < j {
			queue = append(queue, span{q.alo, i, q.blo, j})
		}
		if i+k < q.ahi && j+k < q.bhi {
			queue = append(queue, span{i + k, q.ahi, j + k, q.bhi})
		}
	}
	return n
}

// evalLongestMatch is SequenceMatcher.find_longest_match without junk: the longest
// common block of a[alo:ahi] and b[blo:bhi], the earliest in a, then in b.
func evalLongestMatch(a []rune, b2j map[rune][]int, alo, ahi, blo, bhi int) (int, int, int) {
	besti, bestj, bestk := alo, blo, 0
	j2len := map[int]int{}
	for i := alo; i < ahi; i++ {
		next := map[int]int{}
		for _, j := range b2j[a[i]] {
			if j < blo {
				continue
			}
			if j >= bhi {
				break
			}
			k := j2len[j-1] + 1
			next[j] = k
			if k > bestk {
				besti, bestj, bestk = i-k+1, j-k+1, k
			}
		}
		j2len = next
	}
	return besti, bestj, bestk
}
