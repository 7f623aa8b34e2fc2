package evalguard

import "testing"

// Rules shared by the class-gate cases: the syntax of the factory calls (no
// class statement), and the class statement.
const (
	factory   = "eval-syntax=import, assign, subscript, func, compare, comprehension, arith\n"
	withClass = "eval-syntax=class\n"
	abcM      = factory + "eval-import=abc\neval-attribute=ABCMeta\n"
	enumM     = factory + "eval-import=enum\n"
)

// classFactories: every route by which evaluated code makes a class whose
// special methods the interpreter calls implicitly passes the gate of a class
// statement that defines them (eval-magic for each, then eval-syntax=class),
// whatever built the class: a metaclass call (the metaclass reached at run time
// too), types.new_class and prepare_class, the functional Enum API,
// namedtuple, typing.NamedTuple, make_dataclass, a decorator that sets methods,
// the hooks (__init_subclass__, __set_name__, __class_getitem__), the reduce
// protocol, descriptors. The library's own implementation of a special method
// (namedtuple's __repr__, a dataclass's __eq__, Enum's __new__) is not the
// code's choice and passes; payloads that only use the factories still run.
var classFactories = []matrixCase{
	// Metaclass calls, the metaclass reached at run time.
	caseOf("metaclass_of_a_library_class", factory+"eval-import=abc\neval-attribute=ABC\neval-call=type",
		"import abc\nA = type(abc.ABC)('A', (), {'__iter__': lambda s: s})", "exec", "",
		denied("magic", "__iter__").withFix("eval-magic=__iter__")),
	caseOf("metaclass_call_needs_the_class_statement", factory+"eval-import=abc\neval-attribute=ABC\neval-call=type\neval-magic=__iter__",
		"import abc\nA = type(abc.ABC)('A', (), {'__iter__': lambda s: s})", "exec", "",
		denied("syntax", "ClassDef").withFix("eval-syntax=class")),
	caseOf("metaclass_call_granted", factory+withClass+"eval-import=abc\neval-attribute=ABC\neval-call=type, iter, list, A\neval-magic=__iter__",
		"import abc\nA = type(abc.ABC)('A', (), {'__iter__': lambda s: iter([1, 2])})\nx = list(A())", "exec", "", value("{'x': [1, 2]}")),
	caseOf("metaclass_supplied", factory+"eval-call=M", "X = M('X', (), {'__del__': lambda s: 0})", "exec", "{'M': __import__('abc').ABCMeta}",
		denied("magic", "__del__").withFix("eval-magic=__del__")),
	caseOf("metaclass_of_a_supplied_object", factory+"eval-call=type", "X = type(o)('X', (), {'__hash__': lambda s: 0})", "exec", "{'o': __import__('abc').ABC}",
		denied("magic", "__hash__")),
	caseOf("metaclass_dunder_new", abcM+"eval-magic=__new__", "import abc\nA = abc.ABCMeta.__new__(abc.ABCMeta, 'A', (), {'__len__': lambda s: 0})", "exec", "",
		denied("magic", "__len__")),
	caseOf("abcmeta_call", abcM, "import abc\nA = abc.ABCMeta('A', (), {'__getattr__': lambda s, n: 0})", "exec", "", denied("magic", "__getattr__")),
	caseOf("abcmeta_call_runs", abcM+"eval-call=A, type", "import abc\nA = abc.ABCMeta('A', (), {'n': 1})\nx = type(A()) is A", "exec", "", value("{'x': True}")),
	caseOf("metaclass_with_instancecheck", abcM, "import abc\nM = abc.ABCMeta('M', (T,), {'__instancecheck__': lambda c, o: True})", "exec", "{'T': type}",
		denied("magic", "__instancecheck__")),
	caseOf("namespace_built_in_a_dict", factory+"eval-import=abc\neval-attribute=ABC\neval-call=type",
		"import abc\ng = {}\ng['__eq__'] = lambda s, o: True\nA = type(abc.ABC)('A', (), g)", "exec", "", denied("magic", "__eq__")),
	caseOf("three_argument_type", factory+"eval-call=type", "X = type('X', (), {})", "exec", "", denied("call", "type")),

	// types.new_class and prepare_class.
	caseOf("new_class_exec_body", factory+"eval-import=types\neval-attribute=new_class, update",
		"import types\nX = types.new_class('X', (), {}, lambda ns: ns.update({'__eq__': lambda s, o: True}))", "exec", "",
		denied("write", notMade).withFix(noFix)),
	caseOf("new_class_metaclass_keyword", factory+"eval-import=types, abc\neval-attribute=new_class, ABCMeta\neval-call=X, type",
		"import types, abc\nX = types.new_class('X', (), {'metaclass': abc.ABCMeta})\nx = type(X()) is X", "exec", "", value("{'x': True}")),
	caseOf("prepare_class_then_metaclass", factory+"eval-import=types, abc\neval-attribute=prepare_class, ABC\neval-call=M",
		"import types, abc\nM, ns, kw = types.prepare_class('X', (abc.ABC,))\nX = M('X', (abc.ABC,), {'__eq__': lambda s, o: True})", "exec", "",
		denied("magic", "__eq__")),

	// The functional Enum API (Enum, IntEnum, Flag; pairs, mappings).
	caseOf("enum_pairs", enumM+"eval-attribute=Enum", "import enum\nE = enum.Enum('E', [('a', 1), ('__eq__', lambda s, o: True)])", "exec", "",
		denied("magic", "__eq__").withFix("eval-magic=__eq__")),
	caseOf("intenum_mapping", enumM+"eval-attribute=IntEnum", "import enum\nE = enum.IntEnum('E', {'a': 1, '__index__': lambda s: 7})", "exec", "",
		denied("magic", "__index__")),
	caseOf("flag_pairs", enumM+"eval-attribute=Flag", "import enum\nE = enum.Flag('E', [('a', 1), ('__or__', lambda s, o: s)])", "exec", "",
		denied("magic", "__or__")),
	caseOf("enum_library_value", enumM+"eval-attribute=Enum\neval-call=len", "import enum\nE = enum.Enum('E', [('a', 1), ('__len__', len)])", "exec", "",
		denied("magic", "__len__")),
	caseOf("enum_runs", enumM+"eval-attribute=Enum, IntEnum, Flag, b, a, value", "import enum\nE = enum.Enum('E', 'a b')\nI = enum.IntEnum('I', 'a b')\nF = enum.Flag('F', 'a b')\nx = (E.b.value, I.b + 1, (F.a | F.b).value)", "exec", "",
		value("{'x': (2, 3, 3)}")),
	caseOf("enum_class_statement", enumM+withClass+"eval-attribute=Enum, RED, value", "import enum\nclass Color(enum.Enum):\n RED = 1\nx = Color.RED.value", "exec", "",
		value("{'x': 1}")),

	// namedtuple and typing.NamedTuple: a field name that would be a dunder is
	// refused by the factory; defaults are data.
	caseOf("namedtuple_runs", factory+"eval-import=collections\neval-attribute=namedtuple, a\neval-call=NT, tuple",
		"import collections\nNT = collections.namedtuple('NT', 'a b', defaults=[f])\nx = (NT(1).a, tuple(NT(1, 2)))", "exec", "{'f': len}", value("{'x': (1, (1, 2))}")),
	caseOf("namedtuple_dunder_field", factory+"eval-import=collections\neval-attribute=namedtuple", "import collections\nNT = collections.namedtuple('NT', ['__eq__'])", "exec", "",
		failed("ValueError")),
	caseOf("namedtuple_renamed_field", factory+"eval-import=collections\neval-attribute=namedtuple, _fields", "import collections\nx = collections.namedtuple('NT', ['__eq__'], rename=True)._fields", "exec", "",
		value("{'x': ('_0',)}")),
	caseOf("typing_namedtuple_runs", factory+"eval-import=typing\neval-attribute=NamedTuple, a\neval-call=NT, int", "import typing\nNT = typing.NamedTuple('NT', [('a', int)])\nx = NT(1).a", "exec", "",
		value("{'x': 1}")),
	caseOf("typing_namedtuple_dunder_field", factory+"eval-import=typing\neval-attribute=NamedTuple\neval-call=int", "import typing\nNT = typing.NamedTuple('NT', [('__eq__', int)])", "exec", "",
		failed("ValueError")),
	caseOf("typing_namedtuple_class_dunder", factory+withClass+"eval-import=typing\neval-attribute=NamedTuple\neval-call=int",
		"import typing\nclass P(typing.NamedTuple):\n a: int\n __eq__ = lambda s, o: True", "exec", "", rejected("magic", "__eq__").withFix("eval-magic=__eq__")),

	// make_dataclass: field names and namespace keys pass the attribute gate,
	// the class it builds the class gate.
	caseOf("make_dataclass_runs", factory+"eval-import=dataclasses\neval-attribute=make_dataclass, a\neval-call=D",
		"import dataclasses\nD = dataclasses.make_dataclass('D', ['a'])\nx = D(1) == D(1)", "exec", "", value("{'x': True}")),
	caseOf("make_dataclass_dunder_field", factory+"eval-import=dataclasses\neval-attribute=make_dataclass",
		"import dataclasses\nD = dataclasses.make_dataclass('D', ['__eq__'])", "exec", "", denied("magic", "__eq__")),
	caseOf("make_dataclass_namespace_needs_the_class_statement", factory+"eval-import=dataclasses\neval-attribute=make_dataclass, a\neval-magic=__eq__",
		"import dataclasses\nD = dataclasses.make_dataclass('D', ['a'], namespace={'__eq__': lambda s, o: True})", "exec", "",
		denied("syntax", "ClassDef").withFix("eval-syntax=class")),

	// Decorators that set methods: on a class the code made, their own
	// implementations pass; on a class it did not make they are refused.
	caseOf("total_ordering_runs", factory+withClass+"eval-import=functools\neval-attribute=total_ordering\neval-magic=__lt__\neval-call=C",
		"import functools\n@functools.total_ordering\nclass C:\n def __lt__(s, o):\n  return False\nx = C() >= C()", "exec", "", value("{'x': True}")),
	caseOf("total_ordering_on_a_library_class", factory+"eval-import=functools, fractions\neval-attribute=total_ordering, Fraction",
		"import functools, fractions\nX = functools.total_ordering(fractions.Fraction)", "exec", "", denied("write", "Fraction").withFix(noFix)),
	caseOf("total_ordering_on_a_supplied_class", factory+"eval-import=functools\neval-attribute=total_ordering",
		"import functools\nX = functools.total_ordering(P)", "exec", "{'P': Point}", denied("write", "Point")),
	caseOf("total_ordering_on_a_factory_class", factory+"eval-import=functools, abc\neval-attribute=total_ordering, ABCMeta",
		"import functools, abc\nX = functools.total_ordering(abc.ABCMeta('X', (), {'__lt__': lambda s, o: True}))", "exec", "", denied("magic", "__lt__")),
	caseOf("dataclass_decorator_runs", factory+withClass+"eval-import=dataclasses\neval-attribute=dataclass, x\neval-call=P, int",
		"import dataclasses\n@dataclasses.dataclass(frozen=True, order=True)\nclass P:\n x: int\ny = (P(1) < P(2), P(1) == P(1), P(3).x)", "exec", "", value("{'y': (True, True, 3)}")),
	caseOf("dataclass_slots_runs", factory+withClass+"eval-import=dataclasses\neval-attribute=dataclass, x\neval-call=P, int",
		"import dataclasses\n@dataclasses.dataclass(frozen=True, slots=True)\nclass P:\n x: int\ny = P(1).x", "exec", "", value("{'y': 1}")),
	caseOf("protocol_class_runs", factory+withClass+"eval-import=typing\neval-attribute=Protocol, runtime_checkable\neval-call=isinstance, P",
		"import typing\n@typing.runtime_checkable\nclass P(typing.Protocol):\n def f(self):\n  pass\nx = isinstance(1, P)", "exec", "", value("{'x': False}")),
	caseOf("dataclass_on_a_supplied_class", factory+"eval-import=dataclasses\neval-attribute=dataclass",
		"import dataclasses\nX = dataclasses.dataclass(O)", "exec", "{'O': O}", denied("write", "O")),
	caseOf("decorator_result_gated", factory+withClass+"eval-call=d", "@d(lambda s: 0)\nclass C:\n pass", "exec",
		"{'d': lambda f: lambda c: __import__('abc').ABCMeta('X', (), {'__del__': f})}", denied("magic", "__del__")),
	caseOf("factory_own_methods", factory+withClass+"eval-call=d", "@d\nclass C:\n pass", "exec",
		"{'d': lambda c: __import__('abc').ABCMeta('X', (), {'__del__': lambda s: 0})}", value("{}")),
	caseOf("builtin_chosen_by_the_code", abcM+"eval-call=print", "import abc\nA = abc.ABCMeta('A', (), {'__del__': print})", "exec", "", denied("magic", "__del__")),
	caseOf("library_function_chosen_by_the_code", abcM+"eval-import=os\neval-attribute=getcwd", "import abc, os\nA = abc.ABCMeta('A', (), {'__hash__': os.getcwd})", "exec", "",
		denied("magic", "__hash__")),
	caseOf("supplied_function_chosen_by_the_code", abcM, "import abc\nA = abc.ABCMeta('A', (), {'__iter__': f})", "exec", "{'f': len}", denied("magic", "__iter__")),

	// The hooks and protocols: __init_subclass__, __set_name__,
	// __class_getitem__, __reduce__, descriptors, formatting, __index__,
	// __length_hint__.
	caseOf("init_subclass", abcM+"eval-call=classmethod", "import abc\nA = abc.ABCMeta('A', (), {'__init_subclass__': classmethod(lambda c: 0)})", "exec", "",
		denied("magic", "__init_subclass__")),
	caseOf("set_name", abcM, "import abc\nD = abc.ABCMeta('D', (), {'__set_name__': lambda s, o, n: 0})", "exec", "", denied("magic", "__set_name__")),
	caseOf("class_getitem", abcM+"eval-call=classmethod", "import abc\nA = abc.ABCMeta('A', (), {'__class_getitem__': classmethod(lambda c, k: 0)})", "exec", "",
		denied("magic", "__class_getitem__")),
	caseOf("class_getitem_generic_alias", abcM+"eval-import=types\neval-attribute=GenericAlias\neval-call=classmethod, int, str",
		"import abc, types\nA = abc.ABCMeta('A', (), {'__class_getitem__': classmethod(types.GenericAlias)})\nx = str(A[int])", "exec", "", value("{'x': 'abc.A[int]'}")),
	caseOf("reduce", abcM+"eval-call=print", "import abc\nA = abc.ABCMeta('A', (), {'__reduce__': lambda s: (print, ('x',))})", "exec", "", denied("magic", "__reduce__")),
	caseOf("descriptor_get", abcM, "import abc\nD = abc.ABCMeta('D', (), {'__get__': lambda s, i, o: 0})", "exec", "", denied("magic", "__get__")),
	caseOf("format", abcM, "import abc\nA = abc.ABCMeta('A', (), {'__format__': lambda s, f: ''})", "exec", "", denied("magic", "__format__")),
	caseOf("length_hint", abcM, "import abc\nA = abc.ABCMeta('A', (), {'__length_hint__': lambda s: 0})", "exec", "", denied("magic", "__length_hint__")),
	caseOf("bound_method_as_special_method", abcM+"eval-attribute=append", "import abc\nl = []\nA = abc.ABCMeta('A', (), {'__eq__': l.append})", "exec", "",
		denied("magic", "__eq__")),
	caseOf("partial_as_special_method", abcM+"eval-import=functools\neval-attribute=partial", "import abc, functools\nA = abc.ABCMeta('A', (), {'__eq__': functools.partial(lambda a, b: 0)})", "exec", "",
		denied("magic", "__eq__")),
	caseOf("slot_named_as_special_method", abcM, "import abc\nA = abc.ABCMeta('A', (), {'__slots__': ('__eq__',)})", "exec", "", denied("magic", "__eq__")),
	caseOf("property_as_special_method", abcM+"eval-call=property", "import abc\nA = abc.ABCMeta('A', (), {'__class__': property(lambda s: int)})", "exec", "",
		denied("magic", "__class__")),
	caseOf("doc_property_of_evaluated_code", abcM+"eval-call=property", "import abc\nA = abc.ABCMeta('A', (), {'__doc__': property(lambda s: 'x')})", "exec", "",
		denied("magic", "__doc__")),
	caseOf("doc_of_data", abcM+"eval-magic=__doc__", "import abc\nA = abc.ABCMeta('A', (), {'__doc__': 'text', '__hash__': None})\nx = A.__doc__", "exec", "",
		value("{'x': 'text'}")),
	caseOf("instance_of_a_factory_class", factory+"eval-import=collections\neval-attribute=namedtuple", "import collections\nx = collections.namedtuple('NT', 'a')(1)", "exec", "",
		value("{'x': NT(a=1)}")),
	caseOf("class_of_a_supplied_object", factory+"eval-call=type", "x = type(o)(1) == 1", "exec", "{'o': type('App', (int,), {'__eq__': lambda s, o: True})(0)}",
		value("{'x': True}")),
}

// TestClassFactories: see classFactories.
func TestClassFactories(t *testing.T) { checkMatrix(t, classFactories) }

// classFirstCalls: the class gate and the write rule hold from the first call,
// in an interpreter where the evaluation itself loads the modules.
var classFirstCalls = []matrixCase{
	caseOf("first_enum", enumM+"eval-attribute=Enum", "import enum\nE = enum.Enum('E', [('a', 1), ('__hash__', lambda s: 0)])", "exec", "", denied("magic", "__hash__")),
	caseOf("first_abcmeta", abcM, "import abc\nA = abc.ABCMeta('A', (), {'__del__': lambda s: 0})", "exec", "", denied("magic", "__del__")),
	caseOf("first_total_ordering", factory+"eval-import=functools, fractions\neval-attribute=total_ordering, Fraction",
		"import functools, fractions\nX = functools.total_ordering(fractions.Fraction)", "exec", "", denied("write", "Fraction")),
	caseOf("first_make_dataclass", factory+"eval-import=dataclasses\neval-attribute=make_dataclass, a\neval-magic=__eq__",
		"import dataclasses\nD = dataclasses.make_dataclass('D', ['a'], namespace={'__eq__': lambda s, o: True})", "exec", "", denied("syntax", "ClassDef")),
	caseOf("first_sys_path", factory+"eval-import=sys\neval-attribute=path, append", "import sys\nsys.path.append('/tmp/x')", "exec", "", denied("write", "sys.path")),
	caseOf("first_random_seed", factory+"eval-import=random\neval-attribute=seed", "import random\nrandom.seed(1)", "exec", "", denied("helper", "random.seed")),
	caseOf("first_copyreg_table", factory+"eval-import=copyreg\neval-attribute=dispatch_table\neval-call=int", "import copyreg\ncopyreg.dispatch_table[int] = int", "exec", "",
		denied("write", "copyreg.dispatch_table")),
}

// TestClassGateFromFirstCall: each case in its own fresh interpreter.
func TestClassGateFromFirstCall(t *testing.T) {
	needPython(t)
	for _, c := range classFirstCalls {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			r := runFresh(t, runCase{ID: c.id, Profile: profileOf(t, c.rules, "").Python(), Src: c.src, Mode: c.mode, Names: c.names})
			checkOutcome(t, c, r)
		})
	}
}
