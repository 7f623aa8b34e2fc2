package policy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const evalTestFile = "/some/dir/.py-sandboxes"

// evalQuiet drops the log: warnings are checked through Policy.Warnings.
var evalQuiet = slog.New(slog.DiscardHandler)

func evalTestParse(t testing.TB, text string, args ...string) (*Policy, error) {
	t.Helper()
	return Parse(context.Background(), evalTestFile, []byte(text),
		&Options{Dir: t.TempDir(), Env: []string{"HOST_MODE=closed"}, Home: "/nonexistent-home", Rules: args, Logger: evalQuiet})
}

func evalMustParse(t testing.TB, text string, args ...string) *Policy {
	t.Helper()
	p, err := evalTestParse(t, text, args...)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return p
}

// evalErrLines returns the problems of a failed load, one "file(line): message"
// string each.
func evalErrLines(t testing.TB, err error) []string {
	t.Helper()
	var ce ConfigErrors
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a ConfigErrors", err, err)
	}
	out := make([]string, len(ce))
	for i, c := range ce {
		out[i] = c.Error()
	}
	return out
}

func evalWarnings(p *Policy) []string {
	var out []string
	for _, w := range p.Warnings() {
		out = append(out, w.String())
	}
	return out
}

func evalProfileOf(t testing.TB, p *Policy, name string) *EvalProfile {
	t.Helper()
	prof, ok := p.Eval().Profile(name)
	if !ok {
		t.Fatalf("profile %q not declared (declared: %q)", name, p.Eval().Names())
	}
	return prof
}

const evalAt = evalTestFile

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		args []string
		want []string
	}{
		{
			name: "unknown syntax token suggests the closest",
			text: "eval-syntax=lop",
			want: []string{evalAt + "(1): Invalid rule 'eval-syntax=lop': unknown syntax token 'lop', closest known token is 'loop'"},
		},
		{
			name: "unknown syntax token suggests a node",
			text: "eval-syntax=Binop",
			want: []string{evalAt + "(1): Invalid rule 'eval-syntax=Binop': unknown syntax token 'Binop', closest known token is 'BinOp'"},
		},
		{
			name: "unknown syntax token without a close match",
			text: "eval-syntax=zzzzzz",
			want: []string{evalAt + "(1): Invalid rule 'eval-syntax=zzzzzz': unknown syntax token 'zzzzzz': expected a group (arith, assign, async, class, compare, comprehension, conditional, context, exception, fstring, func, import, loop, subscript, tstring, yield) or an ast node class name"},
		},
		{
			name: "every bad syntax token is reported",
			text: "eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': 'a*': patterns are not allowed on eval-syntax (a closed vocabulary): name a group or an ast node class",
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': 'Num' is a removed alias of Constant (constants are always allowed)",
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': 'parse' is a helper of the ast module, not a node class",
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': 'NodeVisitor' is a helper of the ast module, not a node class",
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': 'expr' is an abstract ast class: name the concrete node classes",
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': empty target",
				evalAt + "(1): Invalid rule 'eval-syntax=arith, a*, Num, parse, NodeVisitor, expr, , DENY:loop': 'DENY:loop': DENY: applies to a whole line: put it on a line of its own",
			},
		},
		{
			name: "removed aliases on the deny side too",
			text: "eval-syntax=DENY:Str\neval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-syntax=DENY:Str': 'Str' is a removed alias of Constant (constants are always allowed)",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'Index' is a removed ast class (a subscript's index is its expression itself)",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'ExtSlice' is a removed ast class (an extended slice is a Tuple)",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'Param' is a removed ast class that the parser never produces",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'Suite' is a removed ast class that the parser never produces",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'Bytes' is a removed alias of Constant (constants are always allowed)",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'NameConstant' is a removed alias of Constant (constants are always allowed)",
				evalAt + "(2): Invalid rule 'eval-syntax=Index, ExtSlice, Param, Suite, Bytes, NameConstant, Ellipsis': 'Ellipsis' is a removed alias of Constant (constants are always allowed)",
			},
		},
		{
			name: "empty value and empty DENY",
			text: "eval-syntax=\neval-call=DENY:\neval-call=len,",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-syntax=': empty target",
				evalAt + "(2): Invalid rule 'eval-call=DENY:': empty target",
				evalAt + "(3): Invalid rule 'eval-call=len,': empty target",
			},
		},
		{
			name: "prefix spellings",
			text: "eval-syntax=deny:loop\neval-call=ALLOW:len",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-syntax=deny:loop': write the prefix as DENY: (in capitals)",
				evalAt + "(2): Invalid rule 'eval-call=ALLOW:len': eval-call takes the names to allow as they are: remove the ALLOW: prefix",
			},
		},
		{
			name: "eval-call takes plain names, never categories",
			text: "eval-call=process-exec, os.system, 1abc",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-call=process-exec, os.system, 1abc': 'process-exec' is not a callable name: eval-call never takes categories (python-api=ALLOW:<category> does)",
				evalAt + "(1): Invalid rule 'eval-call=process-exec, os.system, 1abc': 'os.system' is not a plain callable name: eval-call names what code calls by a bare name (attributes are granted by eval-attribute)",
				evalAt + "(1): Invalid rule 'eval-call=process-exec, os.system, 1abc': invalid callable name '1abc': expected a Python identifier or a '*' pattern",
			},
		},
		{
			name: "non-ASCII names are refused",
			text: "eval-call=ｇetattr",
			want: []string{evalAt + "(1): Invalid rule 'eval-call=ｇetattr': invalid callable name 'ｇetattr': expected a Python identifier or a '*' pattern"},
		},
		{
			name: "eval-attribute tokens",
			text: "eval-attribute=str-method, __class__, f_globals, a b, nosuch-group",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-attribute=str-method, __class__, f_globals, a b, nosuch-group': unknown attribute group 'str-method', closest known group is 'str-methods'",
				evalAt + "(1): Invalid rule 'eval-attribute=str-method, __class__, f_globals, a b, nosuch-group': '__class__' is a dunder name: dunder names are granted by eval-magic, not eval-attribute",
				evalAt + "(1): Invalid rule 'eval-attribute=str-method, __class__, f_globals, a b, nosuch-group': 'f_globals' is a frame attribute: frame capture is always refused and no eval- rule grants it",
				evalAt + "(1): Invalid rule 'eval-attribute=str-method, __class__, f_globals, a b, nosuch-group': invalid attribute name 'a b': expected a Python identifier, a '*' pattern or a group",
				evalAt + "(1): Invalid rule 'eval-attribute=str-method, __class__, f_globals, a b, nosuch-group': unknown attribute group 'nosuch-group', expected one of str-methods, list-methods, dict-methods, set-methods, tuple-methods, num-methods, bytes-methods, date-methods",
			},
		},
		{
			name: "eval-import takes module names",
			text: "eval-import=a/b.py, .x, a..b, json.py",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-import=a/b.py, .x, a..b, json.py': 'a/b.py' is a path: eval-import takes module names (such as json or xml.etree), never paths",
				evalAt + "(1): Invalid rule 'eval-import=a/b.py, .x, a..b, json.py': '.x' is a relative module name: name the module in full",
				evalAt + "(1): Invalid rule 'eval-import=a/b.py, .x, a..b, json.py': invalid module name 'a..b': expected dotted Python identifiers, '*' allowed",
				evalAt + "(1): Invalid rule 'eval-import=a/b.py, .x, a..b, json.py': 'json.py' is a path: eval-import takes module names (such as json or xml.etree), never paths",
			},
		},
		{
			name: "eval-magic takes dunders",
			text: "eval-magic=foo, a*, *__x, __x__, ____",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-magic=foo, a*, *__x, __x__, ____': 'foo' is not a dunder name (__x__): eval-magic grants dunders, ordinary names belong to eval-attribute",
				evalAt + "(1): Invalid rule 'eval-magic=foo, a*, *__x, __x__, ____': pattern 'a*' can never match a dunder name (__x__)",
				evalAt + "(1): Invalid rule 'eval-magic=foo, a*, *__x, __x__, ____': pattern '*__x' can never match a dunder name (__x__)",
				evalAt + "(1): Invalid rule 'eval-magic=foo, a*, *__x, __x__, ____': '____' is not a dunder name (__x__): eval-magic grants dunders, ordinary names belong to eval-attribute",
			},
		},
		{
			name: "the reserved prefix on every list key",
			text: "eval-call=__sb_tick__\neval-magic=__sb_getattr__\neval-attribute=DENY:__sb_x\neval-syntax=__sb_x\neval-import=__sb_m",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-call=__sb_tick__': '__sb_tick__' uses the reserved prefix __sb_ of the guard's helpers: no rule can name it",
				evalAt + "(2): Invalid rule 'eval-magic=__sb_getattr__': '__sb_getattr__' uses the reserved prefix __sb_ of the guard's helpers: no rule can name it",
				evalAt + "(3): Invalid rule 'eval-attribute=DENY:__sb_x': '__sb_x' uses the reserved prefix __sb_ of the guard's helpers: no rule can name it",
				evalAt + "(4): Invalid rule 'eval-syntax=__sb_x': '__sb_x' uses the reserved prefix __sb_ of the guard's helpers: no rule can name it",
				evalAt + "(5): Invalid rule 'eval-import=__sb_m': '__sb_m' uses the reserved prefix __sb_ of the guard's helpers: no rule can name it",
			},
		},
		{
			name: "wrong kind of suffix",
			text: "eval-timeout=10MB\neval-max-iterations=5s\neval-max-call-depth=20KB\neval-max-alloc=10m\neval-max-alloc=10M\neval-timeout=25h\neval-timeout=5S",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-timeout=10MB': 'MB' is a size suffix: eval-timeout takes a duration (a number with ms, s or m; a bare number means seconds)",
				evalAt + "(2): Invalid rule 'eval-max-iterations=5s': 's' is a duration suffix: eval-max-iterations takes a count (a whole number)",
				evalAt + "(3): Invalid rule 'eval-max-call-depth=20KB': 'KB' is a size suffix: eval-max-call-depth takes a count (a whole number)",
				evalAt + "(4): Invalid rule 'eval-max-alloc=10m': 'm' is a duration suffix: eval-max-alloc takes a size (a whole number with KB, MB or GB; a bare number means bytes)",
				evalAt + "(5): Invalid rule 'eval-max-alloc=10M': invalid value '10M': eval-max-alloc takes a size (a whole number with KB, MB or GB; a bare number means bytes)",
				evalAt + "(6): Invalid rule 'eval-timeout=25h': invalid value '25h': eval-timeout takes a duration (a number with ms, s or m; a bare number means seconds)",
				evalAt + "(7): Invalid rule 'eval-timeout=5S': invalid value '5S': eval-timeout takes a duration (a number with ms, s or m; a bare number means seconds)",
			},
		},
		{
			name: "DENY and patterns apply to list keys only",
			text: "eval-timeout=DENY:5\neval-max-alloc=*\neval-namespace=DENY:closed\neval-timeout=2s, 3s",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-timeout=DENY:5': DENY: and '*' patterns apply to list keys only",
				evalAt + "(2): Invalid rule 'eval-max-alloc=*': DENY: and '*' patterns apply to list keys only",
				evalAt + "(3): Invalid rule 'eval-namespace=DENY:closed': DENY: and '*' patterns apply to list keys only",
				evalAt + "(4): Invalid rule 'eval-timeout=2s, 3s': eval-timeout takes a single value",
			},
		},
		{
			name: "bad numbers",
			text: "eval-max-nodes=1__0\neval-max-nodes=_1\neval-max-nodes=1.5\neval-timeout=1e3\neval-timeout=-1\neval-max-depth=\neval-timeout=1..2s",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-max-nodes=1__0': invalid number '1__0' ('_' goes between digits only): eval-max-nodes takes a count (a whole number)",
				evalAt + "(2): Invalid rule 'eval-max-nodes=_1': invalid number '_1' ('_' goes between digits only): eval-max-nodes takes a count (a whole number)",
				evalAt + "(3): Invalid rule 'eval-max-nodes=1.5': '1.5' is not a whole number: eval-max-nodes takes a count (a whole number)",
				evalAt + "(4): Invalid rule 'eval-timeout=1e3': invalid value '1e3': eval-timeout takes a duration (a number with ms, s or m; a bare number means seconds)",
				evalAt + "(5): Invalid rule 'eval-timeout=-1': invalid value '-1': eval-timeout takes a duration (a number with ms, s or m; a bare number means seconds)",
				evalAt + "(6): Invalid rule 'eval-max-depth=': eval-max-depth takes a count (a whole number), not an empty value",
				evalAt + "(7): Invalid rule 'eval-timeout=1..2s': invalid number '1..2' ('_' goes between digits only): eval-timeout takes a duration (a number with ms, s or m; a bare number means seconds)",
			},
		},
		{
			name: "bounds",
			text: "eval-max-alloc=99999999999999999999GB\neval-max-iterations=1_000_000_000_001\neval-timeout=0\neval-timeout=0.5ms\neval-timeout=90000\neval-max-depth=0\neval-max-nodes=0\neval-max-leaked-threads=0\neval-max-leaked-threads=10_001\neval-max-call-depth=99999999999999999999999999999",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-max-alloc=99999999999999999999GB': eval-max-alloc is too large: the maximum is 1_000_000GB",
				evalAt + "(2): Invalid rule 'eval-max-iterations=1_000_000_000_001': eval-max-iterations is too large: the maximum is 1_000_000_000_000",
				evalAt + "(3): Invalid rule 'eval-timeout=0': eval-timeout is too short: the minimum is 1ms",
				evalAt + "(4): Invalid rule 'eval-timeout=0.5ms': eval-timeout is too short: the minimum is 1ms",
				evalAt + "(5): Invalid rule 'eval-timeout=90000': eval-timeout is too long: the maximum is 86400s (24 hours)",
				evalAt + "(6): Invalid rule 'eval-max-depth=0': eval-max-depth is too small: the minimum is 1",
				evalAt + "(7): Invalid rule 'eval-max-nodes=0': eval-max-nodes is too small: the minimum is 1",
				evalAt + "(8): Invalid rule 'eval-max-leaked-threads=0': eval-max-leaked-threads is too small: the minimum is 1",
				evalAt + "(9): Invalid rule 'eval-max-leaked-threads=10_001': eval-max-leaked-threads is too large: the maximum is 10_000",
				evalAt + "(10): Invalid rule 'eval-max-call-depth=99999999999999999999999999999': eval-max-call-depth is too large: the maximum is 1_000_000",
			},
		},
		{
			name: "unknown namespace mode",
			text: "eval-namespace=open\neval-namespace:x=Closed",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-namespace=open': unknown mode 'open', expected one of ['adaptive', 'closed', 'caller']",
				evalAt + "(2): Invalid rule 'eval-namespace:x=Closed': unknown mode 'Closed', expected one of ['adaptive', 'closed', 'caller']",
			},
		},
		{
			name: "unknown keys",
			text: "eval-max-iteration=3\neval-foo=1\neval-=1\neval-zzzzzzzzzzzzzzzzzz=1",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-max-iteration=3': unknown eval key 'eval-max-iteration', closest known key is 'eval-max-iterations'",
				evalAt + "(2): Invalid rule 'eval-foo=1': unknown eval key 'eval-foo', closest known key is 'eval-import'",
				evalAt + "(3): Invalid rule 'eval-=1': unknown eval key 'eval-', closest known key is 'eval-call'",
				evalAt + "(4): Invalid rule 'eval-zzzzzzzzzzzzzzzzzz=1': unknown eval key 'eval-zzzzzzzzzzzzzzzzzz', expected one of eval-syntax, eval-call, eval-attribute, eval-import, eval-magic, eval-namespace, eval-timeout, eval-max-iterations, eval-max-call-depth, eval-max-depth, eval-max-nodes, eval-max-alloc, eval-max-leaked-threads",
			},
		},
		{
			name: "profile names",
			text: "eval-syntax:=x\neval-syntax:1x=arith\neval-syntax:default=arith\neval-syntax:a:b=arith\neval-syntax:é=arith",
			want: []string{
				evalAt + "(1): Invalid rule 'eval-syntax:=x': empty profile name after ':'",
				evalAt + "(2): Invalid rule 'eval-syntax:1x=arith': invalid profile name '1x': expected an identifier (ASCII letters, digits and '_', not starting with a digit)",
				evalAt + "(3): Invalid rule 'eval-syntax:default=arith': the profile name 'default' is reserved for the profile without a suffix: write eval-syntax=...",
				evalAt + "(4): Invalid rule 'eval-syntax:a:b=arith': invalid profile name 'a:b': expected an identifier (ASCII letters, digits and '_', not starting with a digit)",
				evalAt + "(5): Invalid rule 'eval-syntax:é=arith': invalid profile name 'é': expected an identifier (ASCII letters, digits and '_', not starting with a digit)",
			},
		},
		{
			name: "a repeated scalar names the earlier line",
			text: "eval-timeout=2s\neval-syntax=arith\neval-timeout=2s\neval-timeout:llm=1s\neval-max-nodes:llm=10\neval-timeout:llm=3s",
			want: []string{
				evalAt + "(3): Invalid rule 'eval-timeout=2s': eval-timeout is already set in the default profile by " + evalAt + "(1) ('eval-timeout=2s'): a scalar key takes one value per profile",
				evalAt + "(6): Invalid rule 'eval-timeout:llm=3s': eval-timeout is already set in profile 'llm' by " + evalAt + "(4) ('eval-timeout:llm=1s'): a scalar key takes one value per profile",
			},
		},
		{
			name: "a scalar repeated as <arg>",
			args: []string{"eval-max-nodes=10", "eval-max-nodes=20"},
			want: []string{"<arg>: Invalid rule 'eval-max-nodes=20': eval-max-nodes is already set in the default profile by <arg> ('eval-max-nodes=10'): a scalar key takes one value per profile"},
		},
		{
			name: "guarded and unguarded at once",
			text: "eval-syntax=arith\npython-api=ALLOW:dynamic-code\neval-timeout:x=2s\n",
			want: []string{
				evalAt + "(1): eval-* rules conflict with 'python-api=ALLOW:dynamic-code' (" + evalAt + "(2)), which lets builtins.eval, builtins.exec and builtins.compile run unguarded: keep either the guard or the escape hatch, not both; the eval-* rules are 'eval-syntax=arith' (" + evalAt + "(1)), 'eval-timeout:x=2s' (" + evalAt + "(3))",
			},
		},
		{
			name: "a single builtin allowed with eval-* rules",
			text: "python-api=ALLOW:builtins.exec\neval-call:llm=len",
			want: []string{
				evalAt + "(2): eval-* rules conflict with 'python-api=ALLOW:builtins.exec' (" + evalAt + "(1)), which lets builtins.exec run unguarded: keep either the guard or the escape hatch, not both; the eval-* rules are 'eval-call:llm=len' (" + evalAt + "(2))",
			},
		},
		{
			name: "substitution happens before validation",
			text: "eval-namespace=${HOST_MODE}\neval-syntax=${NOPE:-lop}",
			want: []string{evalAt + "(2): Invalid rule 'eval-syntax=${NOPE:-lop}': unknown syntax token 'lop', closest known token is 'loop'"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := evalTestParse(t, tt.text, tt.args...)
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			if !strings.HasPrefix(err.Error(), Headline+"\n") {
				t.Errorf("error does not start with the headline: %q", err)
			}
			if diff := cmp.Diff(tt.want, evalErrLines(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvalNameSets(t *testing.T) {
	type query struct {
		name string
		want bool
	}
	tests := []struct {
		name  string
		text  string
		set   func(*EvalProfile) NameSet
		allow []string // Allow(), as written
		deny  []string // Deny(), as written
		q     []query
	}{
		{
			name:  "core nodes only",
			text:  "eval-namespace=closed",
			set:   func(p *EvalProfile) NameSet { return p.Syntax },
			allow: []string{},
			deny:  []string{},
			q: []query{
				{"Module", true}, {"Expression", true}, {"Interactive", true}, {"Constant", true},
				{"Name", true}, {"Load", true}, {"Store", true}, {"Del", true}, {"Tuple", true},
				{"List", true}, {"Dict", true}, {"Set", true}, {"Expr", true}, {"Pass", true},
				{"BinOp", false}, {"Call", false}, {"Attribute", false}, {"For", false},
			},
		},
		{
			name:  "groups expand, lines accumulate",
			text:  "eval-syntax=arith, compare\neval-syntax=  Match ,loop\neval-syntax=arith",
			set:   func(p *EvalProfile) NameSet { return p.Syntax },
			allow: []string{"Match", "arith", "compare", "loop"},
			deny:  []string{},
			q: []query{
				{"BinOp", true}, {"UnaryOp", true}, {"Compare", true}, {"BoolOp", true},
				{"For", true}, {"While", true}, {"Break", true}, {"Continue", true}, {"Match", true},
				{"arith", false}, {"IfExp", false}, {"MatchAs", false}, {"Name", true},
			},
		},
		{
			name:  "deny wins over groups, whatever the order",
			text:  "eval-syntax=DENY:While, Break\neval-syntax=loop, comprehension\neval-syntax=DENY:fstring",
			set:   func(p *EvalProfile) NameSet { return p.Syntax },
			allow: []string{"comprehension", "loop"},
			deny:  []string{"Break", "While", "fstring"},
			q: []query{
				{"For", true}, {"Continue", true}, {"While", false}, {"Break", false},
				{"ListComp", true}, {"comprehension", true}, {"JoinedStr", false},
			},
		},
		{
			name:  "a core node can be denied",
			text:  "eval-syntax=DENY:Dict",
			set:   func(p *EvalProfile) NameSet { return p.Syntax },
			allow: []string{},
			deny:  []string{"Dict"},
			q:     []query{{"Dict", false}, {"List", true}},
		},
		{
			name:  "call patterns are anchored",
			text:  "eval-call=get*, len\neval-call=DENY:getattr",
			set:   func(p *EvalProfile) NameSet { return p.Call },
			allow: []string{"get*", "len"},
			deny:  []string{"getattr"},
			q: []query{
				{"len", true}, {"get", true}, {"get_item", true}, {"getattr", false},
				{"forget_me", false}, {"lens", false}, {"__sb_getx", false},
			},
		},
		{
			name:  "deny patterns win over exact allows",
			text:  "eval-call=open, sorted\neval-call=DENY:o*",
			set:   func(p *EvalProfile) NameSet { return p.Call },
			allow: []string{"open", "sorted"},
			deny:  []string{"o*"},
			q:     []query{{"open", false}, {"sorted", true}, {"ord", false}},
		},
		{
			name:  "several stars",
			text:  "eval-call=*_to_*",
			set:   func(p *EvalProfile) NameSet { return p.Call },
			allow: []string{"*_to_*"},
			deny:  []string{},
			q:     []query{{"a_to_b", true}, {"_to_", true}, {"ato_b", false}},
		},
		{
			name:  "format is granted only by its exact name",
			text:  "eval-attribute=*",
			set:   func(p *EvalProfile) NameSet { return p.Attribute },
			allow: []string{"*"},
			deny:  []string{},
			q: []query{
				{"upper", true}, {"format", false}, {"format_map", false}, {"formatter", true},
				{"f_globals", false}, {"gi_frame", false}, {"tb_next", false}, {"__sb_getattr__", false},
			},
		},
		{
			name:  "format by exact name",
			text:  "eval-attribute=format, f*",
			set:   func(p *EvalProfile) NameSet { return p.Attribute },
			allow: []string{"f*", "format"},
			deny:  []string{},
			q:     []query{{"format", true}, {"format_map", false}, {"find", true}, {"f_back", false}, {"f_trace", false}},
		},
		{
			name:  "format exactly allowed but denied",
			text:  "eval-attribute=format\neval-attribute=DENY:form*",
			set:   func(p *EvalProfile) NameSet { return p.Attribute },
			allow: []string{"format"},
			deny:  []string{"form*"},
			q:     []query{{"format", false}},
		},
		{
			name:  "attribute groups are kept as names",
			text:  "eval-attribute=str-methods, list-methods, upper\neval-attribute=DENY:dict-methods",
			set:   func(p *EvalProfile) NameSet { return p.Attribute },
			allow: []string{"list-methods", "str-methods", "upper"},
			deny:  []string{"dict-methods"},
			// Allows does not expand attribute groups (documented).
			q: []query{{"upper", true}, {"split", false}, {"str-methods", false}},
		},
		{
			name:  "imports with patterns",
			text:  "eval-import=json, xml.*\neval-import=DENY:xml.sax\neval-syntax=import",
			set:   func(p *EvalProfile) NameSet { return p.Import },
			allow: []string{"json", "xml.*"},
			deny:  []string{"xml.sax"},
			q:     []query{{"json", true}, {"xml.etree", true}, {"xml.sax", false}, {"json.decoder", false}, {"os", false}},
		},
		{
			name:  "magic",
			text:  "eval-magic=__len__, __get*\neval-magic=DENY:__getattribute__",
			set:   func(p *EvalProfile) NameSet { return p.Magic },
			allow: []string{"__get*", "__len__"},
			deny:  []string{"__getattribute__"},
			q:     []query{{"__len__", true}, {"__getitem__", true}, {"__getattribute__", false}, {"__class__", false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := evalMustParse(t, tt.text)
			s := tt.set(evalProfileOf(t, p, ""))
			if diff := cmp.Diff(tt.allow, s.Allow()); diff != "" {
				t.Errorf("Allow() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.deny, s.Deny()); diff != "" {
				t.Errorf("Deny() (-want +got):\n%s", diff)
			}
			for _, q := range tt.q {
				if got := s.Allows(q.name); got != q.want {
					t.Errorf("Allows(%q) = %v, want %v", q.name, got, q.want)
				}
			}
		})
	}
}

func TestEvalExpanded(t *testing.T) {
	p := evalMustParse(t, "eval-syntax=arith\neval-syntax=DENY:UnaryOp\neval-attribute=str-methods, up*, format\neval-attribute=DENY:x")
	prof := evalProfileOf(t, p, "")
	allow, deny := prof.Syntax.Expanded()
	wantAllow := append(EvalCoreNodes(), "BinOp", "UnaryOp")
	slices.Sort(wantAllow)
	if diff := cmp.Diff(wantAllow, allow); diff != "" {
		t.Errorf("syntax allow (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"UnaryOp"}, deny); diff != "" {
		t.Errorf("syntax deny (-want +got):\n%s", diff)
	}
	allow, deny = prof.Attribute.Expanded()
	if diff := cmp.Diff([]string{"format", "str-methods", "up*"}, allow); diff != "" {
		t.Errorf("attribute allow (-want +got):\n%s", diff)
	}
	wantDeny := append(EvalFrameAttributes(), "format_map", "x")
	slices.Sort(wantDeny)
	if diff := cmp.Diff(wantDeny, deny); diff != "" {
		t.Errorf("attribute deny (-want +got):\n%s", diff)
	}
}

func TestEvalProfiles(t *testing.T) {
	text := `eval-syntax=arith, compare
eval-call=len
eval-timeout=2s
eval-syntax:llm=loop
eval-max-nodes:llm=200
eval-call:Row_2=DENY:len
`
	p := evalMustParse(t, text)
	e := p.Eval()
	if diff := cmp.Diff([]string{"", "Row_2", "llm"}, e.Names()); diff != "" {
		t.Errorf("Names() (-want +got):\n%s", diff)
	}
	def := evalProfileOf(t, p, "")
	llm := evalProfileOf(t, p, "llm")
	row := evalProfileOf(t, p, "Row_2")
	if def.Name != "" || llm.Name != "llm" || row.Name != "Row_2" {
		t.Errorf("names: %q %q %q", def.Name, llm.Name, row.Name)
	}
	// The named profile inherits nothing from the default one.
	if llm.Syntax.Allows("BinOp") || !llm.Syntax.Allows("For") || !llm.Syntax.Allows("Name") {
		t.Errorf("llm syntax: BinOp %v For %v Name %v", llm.Syntax.Allows("BinOp"), llm.Syntax.Allows("For"), llm.Syntax.Allows("Name"))
	}
	if llm.Call.Allows("len") || llm.Timeout != 5*time.Second || llm.MaxNodes != 200 {
		t.Errorf("llm: len %v timeout %v nodes %d", llm.Call.Allows("len"), llm.Timeout, llm.MaxNodes)
	}
	if def.Syntax.Allows("For") || !def.Syntax.Allows("BinOp") || def.Timeout != 2*time.Second || def.MaxNodes != 5000 {
		t.Errorf("default: For %v BinOp %v timeout %v nodes %d", def.Syntax.Allows("For"), def.Syntax.Allows("BinOp"), def.Timeout, def.MaxNodes)
	}
	// A profile declared by a DENY line alone still has the core nodes.
	if !row.Syntax.Allows("Constant") || row.Call.Allows("len") {
		t.Errorf("Row_2: Constant %v len %v", row.Syntax.Allows("Constant"), row.Call.Allows("len"))
	}
	// Rules keep each profile's accepted lines with their provenance.
	var got []string
	for _, r := range llm.Rules {
		got = append(got, r.Ref.String()+" "+r.Raw)
	}
	if diff := cmp.Diff([]string{evalAt + "(4) eval-syntax:llm=loop", evalAt + "(5) eval-max-nodes:llm=200"}, got); diff != "" {
		t.Errorf("llm Rules (-want +got):\n%s", diff)
	}
	if _, ok := e.Profile("nosuch"); ok {
		t.Error("an undeclared profile was returned")
	}
	// Profile returns a copy.
	llm.Rules[0].Raw = "changed"
	llm.MaxNodes = 1
	again := evalProfileOf(t, p, "llm")
	if again.Rules[0].Raw != "eval-syntax:llm=loop" || again.MaxNodes != 200 {
		t.Error("Profile does not return a copy")
	}
}

func TestEvalScalars(t *testing.T) {
	tests := []struct {
		line string
		get  func(*EvalProfile) any
		want any
	}{
		{"eval-timeout=2s", func(p *EvalProfile) any { return p.Timeout }, 2 * time.Second},
		{"eval-timeout=2", func(p *EvalProfile) any { return p.Timeout }, 2 * time.Second},
		{"eval-timeout=1.5", func(p *EvalProfile) any { return p.Timeout }, 1500 * time.Millisecond},
		{"eval-timeout=0.1s", func(p *EvalProfile) any { return p.Timeout }, 100 * time.Millisecond},
		{"eval-timeout=.25s", func(p *EvalProfile) any { return p.Timeout }, 250 * time.Millisecond},
		{"eval-timeout=250ms", func(p *EvalProfile) any { return p.Timeout }, 250 * time.Millisecond},
		{"eval-timeout=1_500ms", func(p *EvalProfile) any { return p.Timeout }, 1500 * time.Millisecond},
		{"eval-timeout=1ms", func(p *EvalProfile) any { return p.Timeout }, time.Millisecond},
		{"eval-timeout=1.5m", func(p *EvalProfile) any { return p.Timeout }, 90 * time.Second},
		{"eval-timeout= 3 s ", func(p *EvalProfile) any { return p.Timeout }, 3 * time.Second},
		{"eval-timeout=86400", func(p *EvalProfile) any { return p.Timeout }, 24 * time.Hour},
		{"eval-timeout=1440m", func(p *EvalProfile) any { return p.Timeout }, 24 * time.Hour},
		{"eval-max-iterations=100_000", func(p *EvalProfile) any { return p.MaxIterations }, int64(100_000)},
		{"eval-max-iterations=0", func(p *EvalProfile) any { return p.MaxIterations }, int64(0)},
		{"eval-max-iterations=1_000_000_000_000", func(p *EvalProfile) any { return p.MaxIterations }, int64(1_000_000_000_000)},
		{"eval-max-call-depth=15", func(p *EvalProfile) any { return p.MaxCallDepth }, int64(15)},
		{"eval-max-call-depth=007", func(p *EvalProfile) any { return p.MaxCallDepth }, int64(7)},
		{"eval-max-depth=50", func(p *EvalProfile) any { return p.MaxDepth }, int64(50)},
		{"eval-max-nodes=2_000", func(p *EvalProfile) any { return p.MaxNodes }, int64(2000)},
		{"eval-max-alloc=20MB", func(p *EvalProfile) any { return p.MaxAlloc }, int64(20_000_000)},
		{"eval-max-alloc=20mb", func(p *EvalProfile) any { return p.MaxAlloc }, int64(20_000_000)},
		{"eval-max-alloc=5Kb", func(p *EvalProfile) any { return p.MaxAlloc }, int64(5_000)},
		{"eval-max-alloc=2GB", func(p *EvalProfile) any { return p.MaxAlloc }, int64(2_000_000_000)},
		{"eval-max-alloc=1_000_000GB", func(p *EvalProfile) any { return p.MaxAlloc }, int64(1_000_000_000_000_000)},
		{"eval-max-alloc=1000", func(p *EvalProfile) any { return p.MaxAlloc }, int64(1000)},
		{"eval-max-alloc=0", func(p *EvalProfile) any { return p.MaxAlloc }, int64(0)},
		{"eval-max-leaked-threads=1", func(p *EvalProfile) any { return p.MaxLeakedThreads }, 1},
		{"eval-namespace=closed", func(p *EvalProfile) any { return p.Namespace }, "closed"},
		{"eval-namespace= adaptive ", func(p *EvalProfile) any { return p.Namespace }, "adaptive"},
		{"eval-namespace=caller", func(p *EvalProfile) any { return p.Namespace }, "caller"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			p := evalMustParse(t, tt.line)
			if diff := cmp.Diff(tt.want, tt.get(evalProfileOf(t, p, ""))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvalDefaults(t *testing.T) {
	d := DefaultEvalProfile()
	if d.Name != "" || d.Namespace != "adaptive" || d.Timeout != 5*time.Second || d.MaxIterations != 1_000_000 ||
		d.MaxCallDepth != 20 || d.MaxDepth != 20 || d.MaxNodes != 5_000 || d.MaxAlloc != 10_000_000 || d.MaxLeakedThreads != 4 {
		t.Errorf("defaults: %+v", d)
	}
	for _, n := range EvalCoreNodes() {
		if !d.Syntax.Allows(n) {
			t.Errorf("core node %s not allowed by default", n)
		}
	}
	for _, s := range []NameSet{d.Call, d.Attribute, d.Import, d.Magic} {
		for _, n := range []string{"len", "upper", "json", "__len__", "x"} {
			if s.Allows(n) {
				t.Errorf("%q allowed by default", n)
			}
		}
	}
	// A profile declared by one line has every other default.
	p := evalMustParse(t, "eval-syntax=arith")
	got := evalProfileOf(t, p, "")
	got.Rules, got.Syntax = nil, d.Syntax
	if diff := cmp.Diff(d, got, cmp.AllowUnexported(NameSet{})); diff != "" {
		t.Errorf("profile with one line (-default +got):\n%s", diff)
	}
}

func TestEvalCalculator(t *testing.T) {
	p := evalMustParse(t, "eval-namespace=closed\neval-syntax=arith, compare\neval-max-iterations=100_000\neval-timeout=2s\n")
	if got := p.Eval().State(); got != EvalGuarded {
		t.Fatalf("State() = %v, want guarded", got)
	}
	c := evalProfileOf(t, p, "")
	if c.Namespace != "closed" || c.Timeout != 2*time.Second || c.MaxIterations != 100_000 ||
		c.MaxNodes != 5_000 || c.MaxAlloc != 10_000_000 {
		t.Errorf("calculator: %+v", c)
	}
	for _, n := range []string{"BinOp", "UnaryOp", "Compare", "BoolOp", "Constant", "Expression"} {
		if !c.Syntax.Allows(n) {
			t.Errorf("%s refused", n)
		}
	}
	for _, n := range []string{"Call", "Attribute", "For", "Lambda", "Subscript"} {
		if c.Syntax.Allows(n) {
			t.Errorf("%s allowed", n)
		}
	}
	// No eval-call: len([1, 2]) is refused; no eval-magic: ().__class__ is refused.
	if c.Call.Allows("len") || c.Magic.Allows("__class__") || len(c.Call.Allow()) != 0 {
		t.Error("calculator grants calls or dunders")
	}
	if w := evalWarnings(p); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
	if len(c.Rules) != 4 {
		t.Errorf("Rules: %v", c.Rules)
	}
}

func TestEvalStates(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		state EvalState
		api   string // APIRule().Raw
		names []string
	}{
		{name: "nothing", text: "python-import=json", state: EvalRefused, names: []string{}},
		{name: "guarded", text: "eval-syntax=arith", state: EvalGuarded, names: []string{""}},
		{name: "named profiles alone do not arm the builtins", text: "eval-syntax:llm=arith", state: EvalRefused, names: []string{"llm"}},
		{name: "unguarded", text: "python-api=ALLOW:dynamic-code", state: EvalUnguarded, api: "python-api=ALLOW:dynamic-code", names: []string{}},
		{name: "unguarded by name", text: "python-api=ALLOW:builtins.eval", state: EvalUnguarded, api: "python-api=ALLOW:builtins.eval", names: []string{}},
		{name: "python-api=ALLOW:*", text: "python-api=ALLOW:*", state: EvalUnguarded, api: "python-api=ALLOW:*", names: []string{}},
		{name: "denied category", text: "python-api=DENY:dynamic-code\neval-syntax=arith", state: EvalGuarded, names: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := evalMustParse(t, tt.text).Eval()
			if e.State() != tt.state {
				t.Errorf("State() = %v, want %v", e.State(), tt.state)
			}
			var api string
			if r := e.APIRule(); r != nil {
				api = r.Raw
			}
			if api != tt.api {
				t.Errorf("APIRule() = %q, want %q", api, tt.api)
			}
			if diff := cmp.Diff(tt.names, e.Names()); diff != "" {
				t.Errorf("Names() (-want +got):\n%s", diff)
			}
		})
	}
	// The nil and zero forms are usable.
	var nilPolicy *EvalPolicy
	if nilPolicy.State() != EvalRefused || nilPolicy.Names() != nil || nilPolicy.APIRule() != nil {
		t.Error("nil EvalPolicy")
	}
	if _, ok := nilPolicy.Profile(""); ok {
		t.Error("nil EvalPolicy has a profile")
	}
	if (&Policy{}).Eval() == nil {
		t.Error("Eval() returned nil")
	}
	if s := EvalUnguarded.String(); s != "unguarded" {
		t.Errorf("String() = %q", s)
	}
}

func TestEvalArgRules(t *testing.T) {
	// A scalar given by code or on the command line wins over the file's, like the
	// other single-valued keys; list keys simply add.
	p := evalMustParse(t, "eval-timeout=3s\neval-call=len", "eval-timeout=1s", "eval-call=abs")
	d := evalProfileOf(t, p, "")
	if d.Timeout != time.Second {
		t.Errorf("Timeout = %v, want the <arg> value", d.Timeout)
	}
	if diff := cmp.Diff([]string{"abs", "len"}, d.Call.Allow()); diff != "" {
		t.Errorf("Call (-want +got):\n%s", diff)
	}
}

func TestEvalWarnings(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{
			name: "builtins added by eval-call",
			text: "eval-call=len, getattr, my_func\neval-call=DENY:open",
			want: []string{
				evalAt + "(1): eval-call=len adds the builtin 'len' to the namespace of evaluated code",
				evalAt + "(1): eval-call=getattr adds the sensitive builtin 'getattr' to the namespace of evaluated code: it goes through the attribute gate, so eval-attribute and eval-magic still decide each name",
			},
		},
		{
			name: "patterns",
			text: "eval-call=g*\neval-call=so*\neval-attribute=ge*, upp*",
			want: []string{
				evalAt + "(1): eval-call pattern 'g*' has a fixed part of 1 character: it may match many names (the interpreter's names cannot be counted when the rules are loaded; prefer exact names)",
				evalAt + "(1): eval-call pattern 'g*' adds sensitive builtins to the namespace of evaluated code: getattr, globals",
				evalAt + "(2): eval-call pattern 'so*' has a fixed part of 2 characters: it may match many names (the interpreter's names cannot be counted when the rules are loaded; prefer exact names)",
				evalAt + "(2): eval-call pattern 'so*' adds builtins to the namespace of evaluated code: sorted",
				evalAt + "(3): eval-attribute pattern 'ge*' has a fixed part of 2 characters: it may match many names (the interpreter's names cannot be counted when the rules are loaded; prefer exact names)",
			},
		},
		{
			name: "deny patterns are not warned",
			text: "eval-attribute=DENY:*\neval-call=DENY:g*",
		},
		{
			name: "format, magic, caller",
			text: "eval-attribute=format_map\neval-magic=__class__, __len__\neval-magic=__*__\neval-namespace=caller",
			want: []string{
				evalAt + "(1): eval-attribute=format_map grants str.format_map: every field of its templates is checked against the eval-attribute and eval-magic rules at run time; an f-string is the safer choice",
				evalAt + "(2): eval-magic=__class__ opens the whole type hierarchy to evaluated code",
				evalAt + "(3): eval-magic pattern '__*__' grants __base__, __bases__, __builtins__, __class__, __closure__, __code__, __dict__, __func__, __getattribute__, __globals__, __mro__, __reduce__, __reduce_ex__, __self__, __subclasses__, which open the whole type hierarchy to evaluated code",
				evalAt + "(4): eval-namespace=caller runs evaluated code with the raw builtins: no validation, no rewrite and no budgets (for debugging only)",
			},
		},
		{
			name: "eval-import without eval-syntax=import",
			text: "eval-import=DENY:os\neval-import=json\neval-import=csv\neval-import:ok=json\neval-syntax:ok=import\neval-import:nf=json\neval-syntax:nf=ImportFrom",
			want: []string{
				evalAt + "(2): eval-import has no effect without eval-syntax=import in the default profile: import statements stay refused",
			},
		},
		{
			name: "the calculator is silent",
			text: "eval-namespace=closed\neval-syntax=arith, compare\neval-max-iterations=100_000\neval-timeout=2s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := evalMustParse(t, tt.text)
			if diff := cmp.Diff(tt.want, evalWarnings(p)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvalVocabulary(t *testing.T) {
	nodes := EvalNodes()
	known := map[string]bool{}
	for _, n := range nodes {
		if known[n] {
			t.Errorf("node %s listed twice", n)
		}
		known[n] = true
	}
	if len(nodes) != 113 {
		t.Errorf("%d concrete nodes, want 113 (3.12 and 3.13 have 111, 3.14 adds TemplateStr and Interpolation)", len(nodes))
	}
	for g, members := range EvalSyntaxGroups() {
		if known[g] && g != "comprehension" {
			t.Errorf("group %s shadows a node", g)
		}
		for _, n := range members {
			if !known[n] {
				t.Errorf("group %s: unknown node %s", g, n)
			}
		}
	}
	for _, n := range append(EvalCoreNodes(), "Match", "Global", "Nonlocal", "Delete", "TypeAlias", "MatchStar", "match_case", "TryStar", "keyword", "Call", "Attribute") {
		if !known[n] {
			t.Errorf("node %s missing", n)
		}
	}
	for n := range evalRemovedNodes {
		if known[n] {
			t.Errorf("removed node %s is accepted", n)
		}
	}
	if len(EvalFrameAttributes()) != 15 || len(EvalAttributeGroups()) != 8 || len(EvalSyntaxGroups()) != 16 {
		t.Error("vocabulary sizes")
	}
	// Every node name validates, and no group or node is mistaken for another.
	var b strings.Builder
	b.WriteString("eval-syntax=")
	b.WriteString(strings.Join(nodes, ", "))
	p := evalMustParse(t, b.String())
	for _, n := range nodes {
		if !evalProfileOf(t, p, "").Syntax.Allows(n) {
			t.Errorf("%s not allowed", n)
		}
	}
}

func TestEvalClosestMatch(t *testing.T) {
	// Expected values computed with Python's difflib.get_close_matches(word, cands, n=1).
	cands := []string{"loop", "BinOp", "Lambda", "arith", "assign", "Assign", "compare", "Compare"}
	tests := []struct{ word, want string }{
		{"lop", "loop"}, {"binop", "BinOp"}, {"lamda", "Lambda"}, {"Assing", "Assign"},
		{"assing", "assign"}, {"compar", "compare"}, {"Compar", "Compare"}, {"xyz", ""},
		{strings.Repeat("a", 300), ""}, {"loops", "loop"},
	}
	for _, tt := range tests {
		got, ok := evalClosestMatch(tt.word, cands)
		if ok != (tt.want != "") || got != tt.want {
			t.Errorf("closest(%q) = %q, %v; want %q", tt.word, got, ok, tt.want)
		}
	}
	// Ties go to the greatest candidate, as with heapq.nlargest on (score, word).
	if got, _ := evalClosestMatch("abc", []string{"abd", "abx", "abe"}); got != "abx" {
		t.Errorf("tie: %q, want 'abx'", got)
	}
}

func FuzzEvalRule(f *testing.F) {
	for _, s := range []string{
		"syntax=arith, compare", "syntax:llm=DENY:loop", "call=len, get*", "attribute=str-methods, format",
		"magic=__len__, __*__", "import=json, xml.*", "timeout=1.5s", "max-alloc=10MB", "max-iterations=1_000",
		"namespace=closed", "syntax=lop", "timeout=2s\ntimeout=3s", "call=DENY:a,DENY:b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 4096 {
			return
		}
		// Every line is made an eval-* rule given by code, so that no other family
		// (and no file or network access) is involved.
		var rules []string
		for _, l := range strings.Split(in, "\n") {
			rules = append(rules, "eval-"+l)
		}
		p, err := Parse(context.Background(), "", nil, &Options{Dir: "/nonexistent-dir", Env: []string{}, Home: "/nonexistent-home", Rules: rules, Logger: evalQuiet})
		if err != nil {
			var ce ConfigErrors
			if !errors.As(err, &ce) || len(ce) == 0 {
				t.Fatalf("error %v (%T) is not a ConfigErrors", err, err)
			}
			for _, c := range ce {
				if c.Msg == "" {
					t.Fatal("empty message")
				}
			}
			return
		}
		e := p.Eval()
		for _, name := range e.Names() {
			prof, ok := e.Profile(name)
			if !ok {
				t.Fatalf("declared profile %q missing", name)
			}
			for _, s := range []NameSet{prof.Syntax, prof.Call, prof.Attribute, prof.Import, prof.Magic} {
				s.Expanded()
				if s.Allows("__sb_tick__") {
					t.Fatal("a reserved name is allowed")
				}
			}
			if prof.Attribute.Allows("f_globals") || prof.Attribute.Allows("tb_frame") {
				t.Fatal("a frame attribute is allowed")
			}
			if prof.Attribute.Allows("format") && !slices.Contains(prof.Attribute.Allow(), "format") {
				t.Fatal("format granted without its exact name")
			}
			if prof.Timeout <= 0 || prof.MaxDepth < 1 || prof.MaxNodes < 1 || prof.MaxLeakedThreads < 1 || prof.MaxAlloc < 0 {
				t.Fatalf("out-of-bounds value: %+v", prof)
			}
			if len(prof.Rules) == 0 {
				t.Fatal("a declared profile without rules")
			}
		}
	})
}
