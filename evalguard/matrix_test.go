package evalguard

import (
	"fmt"
	"strings"
	"testing"
)

// want is the expected outcome of a run: rejected (a violation of kind and name
// among those reported), denied (kind and target), interrupted (the budget), a
// NameError, or a value (its repr). fix, when set, is the rule line the refusal
// must carry (noFix: none, the message saying no rule grants it).
type want struct {
	outcome, kind, name, value, fix string
}

// noFix expects a refusal no eval- rule can lift.
const noFix = "(none)"

// notMade is the target of a refused write into an object the evaluation did
// not make (the application's data, a library's state...).
const notMade = "an object the evaluation did not make"

func rejected(kind, name string) want { return want{outcome: "rejected", kind: kind, name: name} }
func denied(kind, name string) want   { return want{outcome: "denied", kind: kind, name: name} }
func interrupted(budget string) want  { return want{outcome: "interrupted", name: budget} }
func value(repr string) want          { return want{outcome: "value", value: repr} }
func nameError(name string) want      { return want{outcome: "nameerror", name: name} }

// failed expects the evaluation to raise an exception of the class typ (not one
// of the guard's): the library itself refused the input.
func failed(typ string) want { return want{outcome: "error", kind: typ} }
func (w want) String() string {
	return fmt.Sprintf("%s %s %s %s %s", w.outcome, w.kind, w.name, w.value, w.fix)
}

// withFix expects the refusal to carry fix (or noFix).
func (w want) withFix(fix string) want { w.fix = fix; return w }
func caseOf(id, rules, src, mode, names string, w want) matrixCase {
	return matrixCase{id, rules, src, mode, names, w}
}

type matrixCase struct {
	id, rules, src, mode, names string
	want                        want
}

// declared makes the default profile exist when a case keeps every default.
const declared = "eval-max-nodes=5000\n"

// attackMatrix holds the reference's attack matrix (every payload that must be
// blocked, every payload that must run), its security corpus and hardening cases,
// and the guard's own additions.
var attackMatrix = []matrixCase{
	// Blocked attacks.
	caseOf("getattr_to_magic", "eval-call=getattr", "getattr((), '__class__')", "", "", denied("magic", "__class__")),
	caseOf("getattr_to_frame", "eval-syntax=comprehension\neval-call=getattr", "getattr(getattr((i for i in [1]), 'gi_frame'), 'f_globals')", "", "", denied("frame", "gi_frame")),
	caseOf("getattr_subclasses_to_popen", "eval-syntax=comprehension, compare\neval-call=getattr, list",
		"[c for c in getattr(getattr(getattr((),'__class__'),'__base__'),'__subclasses__')() if getattr(c,'__name__')=='Popen']", "", "", denied("magic", "__class__")),
	caseOf("getattr_default_on_refused_name", "eval-call=getattr", "getattr((), '__class__', 'x')", "", "", denied("magic", "__class__")),
	caseOf("setattr", "eval-call=setattr", "setattr(o, 'x', 7)", "", "{'o': O()}", denied("attribute", "setattr")),
	caseOf("delattr", "eval-call=delattr", "delattr(o, 'x')", "", "{'o': O()}", denied("attribute", "delattr")),
	caseOf("vars", "eval-call=vars", "vars(o)", "", "{'o': O()}", denied("magic", "__dict__")),
	caseOf("vars_no_arg", "eval-call=vars", "vars()", "", "", denied("call", "vars")),
	caseOf("type_class_factory", "eval-call=type", "type('X', (), {})", "", "", denied("call", "type")),
	caseOf("globals", "eval-call=globals", "globals()", "", "", denied("call", "globals")),
	caseOf("breakpoint", "eval-call=breakpoint", "breakpoint()", "", "", denied("call", "breakpoint")),
	caseOf("dir_no_arg", "eval-call=dir", "dir()", "", "", denied("call", "dir")),
	caseOf("dotted_dunder", declared, "().__class__", "", "", rejected("magic", "__class__")),
	caseOf("gi_frame_dot", "eval-syntax=comprehension", "(i for i in ()).gi_frame", "", "", rejected("frame", "gi_frame")),
	caseOf("gi_frame_dot_star", "eval-syntax=comprehension\neval-attribute=*\neval-magic=*", "(i for i in ()).gi_frame", "", "", rejected("frame", "gi_frame")),
	caseOf("format_instance_dunder", "eval-attribute=format", "'{0.__class__}'.format(())", "", "", rejected("format", "__class__")),
	caseOf("format_instance_dunder_dynamic", "eval-attribute=format", "t.format(())", "", "{'t': '{0.__class__}'}", denied("format", "__class__")),
	caseOf("format_class_unbound", "eval-call=str\neval-attribute=format", "str.format('{0.__class__}', ())", "", "", denied("format", "__class__")),
	caseOf("format_via_type", "eval-call=type\neval-attribute=format", "type('').format('{0.__class__}', ())", "", "", denied("format", "__class__")),
	caseOf("format_map_dunder", "eval-attribute=format_map", "'{0.__class__}'.format_map([()])", "", "", rejected("format", "__class__")),
	caseOf("format_nested_spec", "eval-attribute=format", "'{0:{1.__class__}}'.format(3, 4)", "", "", rejected("format", "__class__")),
	caseOf("format_nested_spec_dynamic", "eval-attribute=format", "t.format(3, 4)", "", "{'t': '{0:{1.__class__}}'}", denied("format", "__class__")),
	caseOf("lambda_recursion", "eval-syntax=func\neval-call=f, g\neval-max-call-depth=5\neval-timeout=3s", "(lambda g: g(g))(lambda f: f(f))", "", "", interrupted("eval-max-call-depth")),
	caseOf("def_recursion", "eval-syntax=func, arith\neval-call=f\neval-max-call-depth=5", "def f(n):\n return f(n + 1)\nf(0)", "exec", "", interrupted("eval-max-call-depth")),
	caseOf("generator_recursion", "eval-syntax=func, yield, comprehension, arith\neval-call=g, list\neval-max-call-depth=5", "def g(n):\n yield from g(n + 1)\n yield n\nlist(g(0))", "exec", "", interrupted("eval-max-call-depth")),
	caseOf("comprehension_iteration_budget", "eval-syntax=comprehension, arith\neval-call=range\neval-max-iterations=1000", "[0 for _ in range(10**9)]", "", "", interrupted("eval-max-iterations")),
	caseOf("pow_allocation", "eval-syntax=arith\neval-max-alloc=1000", "2 ** 80000", "", "", interrupted("eval-max-alloc")),
	caseOf("reserved_helper_name", "eval-call=getattr", "__sb_getattr__((), 'x')", "", "", rejected("reserved", "__sb_getattr__")),
	caseOf("lambda_closure", "eval-syntax=func\neval-call=f", "(lambda f: f.__closure__)(lambda: 0)", "", "", rejected("frame", "__closure__")),
	caseOf("import_statement", "eval-syntax=import", "import os", "exec", "", rejected("import", "os")),
	caseOf("fstring_attribute", "eval-syntax=fstring", "f'{ ().__class__ }'", "", "", rejected("magic", "__class__")),
	caseOf("type_mro_hop_to_subclasses", "eval-syntax=subscript\neval-call=type, getattr\neval-attribute=mro", "getattr(type(()).mro()[1], '__subclasses__')", "", "", denied("magic", "__subclasses__")),

	// Payloads that must run.
	caseOf("arithmetic", "eval-syntax=arith", "2 + 3 * 4", "", "", value("14")),
	caseOf("comprehension", "eval-syntax=comprehension, arith\neval-call=range", "[x * 2 for x in range(3)]", "", "", value("[0, 2, 4]")),
	caseOf("type_one_arg", "eval-call=type", "type(())", "", "", value("<class 'tuple'>")),
	caseOf("format_over_data", "eval-attribute=format", "'{0}-{1[0]}'.format(5, (7,))", "", "", value("'5-7'")),
	caseOf("str_method", "eval-attribute=upper", "'ab'.upper()", "", "", value("'AB'")),
	caseOf("dos_c_loop_no_tick", "eval-syntax=arith\neval-call=sum, range\neval-max-iterations=100", "sum(range(2000))", "", "", value("1999000")),
	caseOf("dos_bytes_allocation", "eval-syntax=arith\neval-call=bytes, len\neval-max-alloc=100", "len(bytes(5000))", "", "", value("5000")),
	// '%' is a rewritten operator: its widths count against eval-max-alloc.
	caseOf("dos_percent_width", "eval-syntax=arith\neval-call=len\neval-max-alloc=100", "len('%0500d' % 1)", "", "", interrupted("eval-max-alloc")),
	caseOf("dos_percent_width_default_budget", "eval-syntax=arith\neval-call=len", "len('%0500d' % 1)", "", "", value("500")),

	// Security corpus.
	caseOf("popen_escape_closed", "eval-syntax=comprehension, compare, subscript\neval-namespace=closed",
		"[c for c in ().__class__.__base__.__subclasses__() if c.__name__=='Popen'][0](['/bin/sh'])", "", "", rejected("magic", "__class__")),
	caseOf("popen_escape_attribute_star", "eval-syntax=comprehension, compare, subscript\neval-attribute=*",
		"[c for c in ().__class__.__base__.__subclasses__() if c.__name__=='Popen'][0](['/bin/sh'])", "", "", rejected("magic", "__subclasses__")),
	caseOf("magic_and_attribute_star_is_a_configuration_error", "eval-attribute=*\neval-magic=*", "().__class__.__base__", "", "", value("<class 'object'>")),
	caseOf("getattr_through_a_list", "eval-syntax=subscript\neval-call=getattr", "[getattr][0](object(), '__class__')", "", "", rejected("call", "object")),
	caseOf("getattr_through_a_list_runtime", "eval-syntax=subscript\neval-call=getattr", "[getattr][0](o, '__class__')", "", "{'o': O()}", denied("magic", "__class__")),
	caseOf("builtins_dict", "eval-syntax=subscript, arith\neval-namespace=closed", "__builtins__.__dict__['ope' + 'n']('/etc/passwd').read()", "", "", rejected("frame", "__builtins__")),

	// Hardening: getattr's default, string.Formatter.
	caseOf("getattr_default_on_missing", "eval-call=getattr\neval-attribute=zzz", "getattr([], 'zzz', 99)", "", "", value("99")),
	caseOf("formatter_format", "eval-attribute=format, vformat, get_field", "F.format('{0.__class__.__base__}', ())", "", "{'F': Formatter()}", denied("format", "__class__")),
	caseOf("formatter_vformat", "eval-attribute=format, vformat, get_field", "F.vformat('{0.__class__}', ((),), {})", "", "{'F': Formatter()}", denied("format", "__class__")),
	caseOf("formatter_get_field", "eval-attribute=format, vformat, get_field", "F.get_field('0.__class__', ((),), {})", "", "{'F': Formatter()}", denied("format", "__class__")),
	caseOf("formatter_lying_parse", "eval-attribute=format", "L.format('plain', ())", "", "{'L': Liar()}", denied("format", "__class__")),
	caseOf("formatter_executor_thread", "eval-attribute=format, submit, result", "X.submit(F.format, '{0.__class__.__base__}', ()).result()", "", "{'F': Formatter(), 'X': X}", denied("format", "__class__")),
	caseOf("formatter_data", "eval-attribute=format, real", "F.format('{0.real}', 5)", "", "{'F': Formatter()}", value("'5'")),

	// Defects: the reserved prefix in every binding field.
	caseOf("reserved_def", "eval-syntax=func", "def __sb_tick__():\n pass", "exec", "", rejected("reserved", "__sb_tick__")),
	caseOf("reserved_class", "eval-syntax=class", "class __sb_x:\n pass", "exec", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_lambda_arg", "eval-syntax=func", "lambda __sb_x: 1", "", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_keyword", "eval-call=f", "f(__sb_x=1)", "", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_except_name", "eval-syntax=exception\neval-call=E", "try:\n pass\nexcept E as __sb_x:\n pass", "exec", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_global", "eval-syntax=func", "def f():\n global __sb_x", "exec", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_match_capture", "eval-syntax=Match, match_case, MatchAs", "match 1:\n case __sb_x:\n  pass", "exec", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_match_rest", "eval-syntax=Match, match_case, MatchMapping", "match {}:\n case {**__sb_x}:\n  pass", "exec", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_import_alias", "eval-syntax=import\neval-import=json", "import json as __sb_x", "exec", "", rejected("reserved", "__sb_x")),
	caseOf("reserved_assignment", "eval-syntax=assign, func", "__sb_tick__ = lambda: None", "exec", "", rejected("reserved", "__sb_tick__")),
	// Defects: allocation through augmented assignment, evaluated once.
	caseOf("augmented_mul_allocation", "eval-syntax=assign\neval-max-alloc=1000", "a *= 10000", "exec", "{'a': [0]}", interrupted("eval-max-alloc")),
	caseOf("augmented_add_allocation", "eval-syntax=assign\neval-max-alloc=1000", "a += b", "exec", "{'a': [0] * 600, 'b': [0] * 600}", interrupted("eval-max-alloc")),
	caseOf("augmented_subscript_once", "eval-syntax=assign, subscript, func\neval-call=k",
		"n = [0]\nd = {'k': [1]}\ndef k():\n n[0] += 1\n return 'k'\nd[k()] += [2]", "exec", "", value("{'n': [1], 'd': {'k': [1, 2]}}")),
	caseOf("augmented_slice", "eval-syntax=assign, subscript", "d = [1, 2, 3]\nd[0:2] *= 2", "exec", "", value("{'d': [1, 2, 1, 2, 3]}")),

	// The guard's own additions.
	caseOf("interrupt_not_swallowed_by_except_baseexception", "eval-syntax=loop, exception, assign\neval-call=BaseException\neval-max-iterations=10",
		"try:\n while True: pass\nexcept BaseException:\n pass\nx = 1", "exec", "", interrupted("eval-max-iterations")),
	caseOf("interrupt_not_swallowed_by_bare_except", "eval-syntax=loop, exception, assign\neval-max-iterations=10",
		"try:\n while True: pass\nexcept:\n x = 1\nwhile True: pass", "exec", "", interrupted("eval-max-iterations")),
	caseOf("interrupt_not_swallowed_by_return_in_finally", "eval-syntax=loop, exception, assign, func\neval-call=f\neval-max-iterations=10",
		"def f():\n try:\n  while True: pass\n finally:\n  return 1\nx = f()", "exec", "", interrupted("eval-max-iterations")),
	caseOf("interrupt_not_swallowed_by_exit", "eval-syntax=loop, context, assign\neval-call=BaseException, S\neval-max-iterations=10",
		"with S(BaseException):\n while True: pass\nx = 1", "exec", "{'S': suppress}", interrupted("eval-max-iterations")),
	caseOf("timeout", "eval-syntax=loop\neval-timeout=200ms\neval-max-iterations=1_000_000_000_000", "while True: pass", "exec", "", interrupted("eval-timeout")),
	caseOf("fstring_width_allocation", "eval-syntax=fstring\neval-max-alloc=100", "f'{1:>{n}}'", "", "{'n': 10**6}", interrupted("eval-max-alloc")),
	caseOf("format_width_allocation", "eval-syntax=arith\neval-attribute=format\neval-max-alloc=100", "'{0:>{1}}'.format(1, 10**6)", "", "", interrupted("eval-max-alloc")),
	caseOf("format_builtin_allocation", "eval-call=format", "format(1, '>1000000000')", "", "", interrupted("eval-max-alloc")),
	caseOf("ljust_allocation", "eval-syntax=arith\neval-attribute=ljust", "'x'.ljust(10**9)", "", "", interrupted("eval-max-alloc")),
	caseOf("unbound_ljust_allocation", "eval-syntax=arith\neval-call=str\neval-attribute=ljust", "str.ljust('x', 10**9)", "", "", interrupted("eval-max-alloc")),
	caseOf("join_doubling", "eval-syntax=loop, assign, subscript\neval-call=range\neval-attribute=join", "s = 'x'\nfor i in range(60):\n s = s.join([s, s])", "exec", "", interrupted("eval-max-alloc")),
	caseOf("extend_doubling", "eval-syntax=loop, assign\neval-call=range\neval-attribute=extend", "l = [0]\nfor i in range(60):\n l.extend(l)", "exec", "", interrupted("eval-max-alloc")),
	caseOf("squaring", "eval-syntax=loop, assign, arith\neval-call=range\neval-max-alloc=1000", "x = 10\nfor i in range(60):\n x = x * x", "exec", "", interrupted("eval-max-alloc")),
	caseOf("shift", "eval-syntax=arith", "1 << 10**9", "", "", interrupted("eval-max-alloc")),
	caseOf("pow_builtin", "eval-syntax=arith\neval-call=pow", "pow(2, 10**9)", "", "", interrupted("eval-max-alloc")),
	caseOf("write_into_supplied_list", "eval-syntax=assign, subscript", "rows[0] = 1", "exec", "{'rows': [0]}", denied("write", notMade)),
	caseOf("write_into_supplied_nested", "eval-syntax=assign, subscript", "rows[0]['a'] = 1", "exec", "{'rows': [{'a': 0}]}", denied("write", notMade)),
	caseOf("write_into_own_list", "eval-syntax=assign, subscript", "r = [0]\nr[0] = 1", "exec", "{'rows': [0]}", value("{'r': [1]}")),
	caseOf("traceback_frame", "eval-syntax=func, exception, arith\neval-call=f, ZeroDivisionError\neval-magic=__traceback__",
		"def f():\n try:\n  1/0\n except ZeroDivisionError as e:\n  return e.__traceback__.tb_frame\nf()", "exec", "", rejected("frame", "tb_frame")),
	caseOf("function_globals", "eval-syntax=func\neval-magic=*\neval-attribute=*", "(lambda: 0).__globals__", "", "", rejected("frame", "__globals__")),
	caseOf("shim_internals", "eval-call=getattr\neval-magic=*", "getattr.__self__", "", "", denied("frame", "__self__")),
	caseOf("locals_hides_helpers", "eval-syntax=subscript\neval-call=locals, sorted", "sorted(locals())", "", "", value("['__name__']")),
	caseOf("nested_eval_is_guarded", "eval-call=eval", "eval('().__class__')", "", "", rejected("magic", "__class__")),
	caseOf("nested_exec_shares_budgets", "eval-syntax=loop\neval-call=exec\neval-max-iterations=10", "exec('while True: pass')", "", "", interrupted("eval-max-iterations")),
	caseOf("nested_eval_runs", "eval-syntax=arith\neval-call=eval", "eval('1 + 1')", "", "", value("2")),
	caseOf("compile_then_exec", "eval-syntax=loop\neval-call=compile, exec\neval-max-iterations=10", "exec(compile('while True: pass', 'x', 'exec'))", "", "", interrupted("eval-max-iterations")),
	caseOf("class_pattern_positional", "eval-syntax=Match, match_case, MatchClass, MatchAs\neval-call=C", "match x:\n case C(a):\n  pass", "exec", "", rejected("syntax", "MatchClass")),
	caseOf("class_pattern_keyword_dunder", "eval-syntax=Match, match_case, MatchClass, MatchAs\neval-call=object", "match x:\n case object(__class__=c):\n  pass", "exec", "", rejected("magic", "__class__")),
	caseOf("class_pattern_self_match", "eval-syntax=Match, match_case, MatchClass, MatchAs, assign\neval-call=int", "match x:\n case int(n):\n  r = n", "exec", "{'x': 5}", value("{'n': 5, 'r': 5}")),
	caseOf("metaclass_is_the_shim", "eval-syntax=compare\neval-call=type", "type(type(1)) is type", "", "", value("True")),
	caseOf("metaclass_class_factory", "eval-call=type", "type(type(1))('X', (), {})", "", "", denied("call", "type")),
	caseOf("match_mapping_dotted_key", "eval-syntax=Match, match_case, MatchMapping, MatchAs, assign\neval-attribute=k", "match d:\n case {o.k: v}:\n  r = v", "exec", "{'d': {1: 2}, 'o': type('K', (), {'k': 1})}", value("{'v': 2, 'r': 2}")),
	caseOf("star_import", "eval-syntax=import\neval-import=json", "from json import *", "exec", "", rejected("import", "*")),
	caseOf("relative_import", "eval-syntax=import\neval-import=json", "from . import json", "exec", "", rejected("import", ".")),
	caseOf("submodule_through_fromlist", "eval-syntax=import\neval-import=xml\neval-attribute=dom", "from xml import dom", "exec", "", denied("import", "xml.dom")),
	caseOf("import_granted", "eval-syntax=import, assign\neval-import=json\neval-attribute=dumps", "import json\nx = json.dumps([1])", "exec", "", value("{'x': '[1]'}")),
	caseOf("attribute_store", "eval-syntax=assign", "o.x = 1", "exec", "{'o': O()}", rejected("attribute", "x")),
	caseOf("undeclared_builtin", declared, "len([1])", "", "", rejected("call", "len")),
	caseOf("bare_name_not_granted", "eval-syntax=arith", "len", "", "", nameError("len")),
	caseOf("deep_expression", "eval-syntax=arith", strings.Repeat("-", 30)+"1", "", "", rejected("depth", "eval-max-depth")),
	caseOf("parser_depth", "eval-syntax=arith", strings.Repeat("-", 3000)+"1", "", "", rejected("depth", "eval-max-depth")),
	caseOf("ungranted_call_in_a_dead_branch", "eval-syntax=func, arith, comprehension\neval-call=f, list, range", "list(map(f, range(3))) if False else [f(i) for i in range(3)]", "", "{'f': (lambda x: x)}", rejected("call", "map")),
}

// TestAttackMatrix: every blocked payload is stopped by the expected layer (the
// violation kind and name, the refused name, or the budget), every payload that
// must run gives its value, all through the module's run() in /usr/bin/python3.
func TestAttackMatrix(t *testing.T) { checkMatrix(t, attackMatrix) }

// checkMatrix runs the cases in one interpreter and checks each outcome.
func checkMatrix(t *testing.T, matrix []matrixCase) {
	t.Helper()
	var cases []runCase
	seen := map[string]bool{}
	for _, c := range matrix {
		if seen[c.id] {
			t.Fatalf("duplicate case id %s", c.id)
		}
		seen[c.id] = true
		cases = append(cases, runCase{ID: c.id, Profile: profileOf(t, c.rules, "").Python(), Src: c.src, Mode: c.mode, Names: c.names})
	}
	got := runAll(t, cases)
	for _, c := range matrix {
		t.Run(c.id, func(t *testing.T) {
			r, ok := got[c.id]
			if !ok {
				t.Fatal("no outcome")
			}
			checkOutcome(t, c, r)
		})
	}
}

func checkOutcome(t *testing.T, c matrixCase, r runOutcome) {
	t.Helper()
	if r.Outcome != c.want.outcome {
		t.Fatalf("%s: want %s, got %+v", c.src, c.want, r)
	}
	switch r.Outcome {
	case "value":
		if r.Value != c.want.value {
			t.Errorf("value %s, want %s", r.Value, c.want.value)
		}
	case "rejected":
		var hit *violationOut
		for i, v := range r.Violations {
			if v.Kind == c.want.kind && v.Name == c.want.name {
				hit = &r.Violations[i]
			}
		}
		if hit == nil {
			t.Fatalf("violations %+v do not hold %s %s", r.Violations, c.want.kind, c.want.name)
		}
		checkFix(t, c.want.fix, hit.Fix, r.Message, "no eval- rule allows it")
	case "denied":
		if r.Kind != c.want.kind || r.Target != c.want.name {
			t.Errorf("denied %s %q, want %s %q (%s)", r.Kind, r.Target, c.want.kind, c.want.name, r.Message)
		}
		if !strings.Contains(r.Message, "denied by the eval guard") && !strings.Contains(r.Message, "evaluated code cannot") {
			t.Errorf("message %q", r.Message)
		}
		if r.Fix != "" {
			// A fix names the rule that decides it.
			if key, _, _ := strings.Cut(r.Fix, "="); key != r.Rule || !strings.Contains(r.Message, "`"+r.Fix+"`") {
				t.Errorf("fix %q, rule %q, message %q", r.Fix, r.Rule, r.Message)
			}
		}
		checkFix(t, c.want.fix, r.Fix, r.Message, "no eval- rule grants it")
	case "interrupted":
		if r.Budget != c.want.name || !strings.HasPrefix(r.Message, "evaluation interrupted: "+c.want.name+"=") {
			t.Errorf("interrupted by %s (%s), want %s", r.Budget, r.Message, c.want.name)
		}
	case "nameerror":
		if !strings.Contains(r.Message, "'"+c.want.name+"'") {
			t.Errorf("NameError %q", r.Message)
		}
	case "error":
		if r.Type != c.want.kind {
			t.Errorf("%s: %s, want %s", r.Type, r.Message, c.want.kind)
		}
	}
}

// checkFix: the refusal carries the expected rule line, or none (and then says
// that no rule allows it).
func checkFix(t *testing.T, want, got, message, never string) {
	t.Helper()
	switch want {
	case "":
	case noFix:
		if got != "" || !strings.Contains(message, never) {
			t.Errorf("want no fix (%q), got fix %q, message %q", never, got, message)
		}
	default:
		if got != want {
			t.Errorf("fix %q, want %q", got, want)
		}
	}
}
