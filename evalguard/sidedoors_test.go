package evalguard

import "testing"

// Rules shared by the side-door cases.
const (
	imp   = "eval-syntax=import, assign, subscript\n"
	impFn = "eval-syntax=import, assign, subscript, func, comprehension, compare\n"
)

// sideDoors: the routes around the attribute and import gates, by family. Each
// case is a payload, the profile (granting only what it names), and the expected
// refusal with the mechanism and the rule that would allow it (or noFix when none
// does), or the value of a payload that must still run.
var sideDoors = []matrixCase{
	// Names taken from a module pass the attribute gate (statically, and at run
	// time); a module reached by any route passes eval-import, unless the
	// application supplied it.
	caseOf("from_import_private_name", imp+"eval-import=random", "from random import _os", "exec", "",
		rejected("attribute", "_os").withFix("eval-attribute=_os")),
	caseOf("from_import_module_remove_file", imp+"eval-import=random\neval-attribute=_os, remove", "from random import _os\n_os.remove('/nonexistent/x')", "exec", "",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("from_import_sys_modules", imp+"eval-import=collections\neval-attribute=_sys, modules", "from collections import _sys\nx = _sys.modules", "exec", "",
		denied("import", "sys").withFix("eval-import=sys")),
	caseOf("from_import_public_module_name", imp+"eval-import=json\neval-attribute=codecs", "from json import codecs", "exec", "",
		denied("import", "codecs").withFix("eval-import=codecs")),
	caseOf("from_import_public_module_name_static", imp+"eval-import=json", "from json import codecs", "exec", "",
		rejected("attribute", "codecs").withFix("eval-attribute=codecs")),
	caseOf("from_import_dunder", imp+"eval-import=json", "from json import __builtins__", "exec", "",
		rejected("frame", "__builtins__").withFix(noFix)),
	caseOf("module_attribute_of_module", imp+"eval-import=json\neval-attribute=codecs", "import json\nx = json.codecs", "exec", "",
		denied("import", "codecs").withFix("eval-import=codecs")),
	caseOf("module_attribute_granted", imp+"eval-import=json, codecs\neval-attribute=codecs, encode", "import json\nx = json.codecs.encode('a', 'rot13')", "exec", "",
		value("{'x': 'n'}")),
	caseOf("from_import_function_granted", imp+"eval-import=json\neval-attribute=dumps\neval-call=dumps", "from json import dumps\nx = dumps([1])", "exec", "",
		value("{'x': '[1]'}")),
	caseOf("from_import_missing_name", imp+"eval-import=json\neval-attribute=nosuch, dumps\neval-syntax=exception\neval-call=ImportError",
		"try:\n from json import dumps, nosuch\nexcept ImportError:\n x = 1", "exec", "", denied("import", "json.nosuch").withFix("eval-import=json.nosuch")),
	caseOf("sys_modules_subscript", imp+"eval-import=sys\neval-attribute=modules", "import sys\nx = sys.modules['os']", "exec", "",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("sys_modules_get", imp+"eval-import=sys\neval-attribute=modules, get", "import sys\nx = sys.modules.get('os')", "exec", "",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("sys_modules_comprehension", impFn+"eval-import=sys\neval-attribute=modules, values", "import sys\nx = [m for m in sys.modules.values()]", "exec", "",
		denied("import", "builtins").withFix(noFix)),
	caseOf("sys_modules_unpacked_then_used", impFn+"eval-import=sys\neval-attribute=modules, items, getcwd\neval-call=m",
		"import sys\nm, = [v for k, v in sys.modules.items() if k == 'os']\nx = m.getcwd()", "exec", "", denied("import", "os").withFix("eval-import=os")),
	caseOf("importlib_import_module", imp+"eval-import=importlib\neval-attribute=import_module", "import importlib\nx = importlib.import_module('os')", "exec", "",
		rejected("import", "importlib").withFix(noFix)),
	caseOf("dunder_import_granted_by_eval_call", "eval-syntax=assign\neval-call=__import__", "x = __import__('os')", "exec", "",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("dunder_import_runs_when_granted", "eval-syntax=assign\neval-call=__import__\neval-import=json\neval-attribute=dumps", "x = __import__('json').dumps([1])", "exec", "",
		value("{'x': '[1]'}")),
	caseOf("dunder_import_fromlist", "eval-syntax=assign\neval-call=__import__\neval-import=random\neval-attribute=_os", "x = __import__('random', None, None, ['_os'])._os", "exec", "",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("import_dotted_binds_the_root", imp+"eval-import=os.path", "import os.path", "exec", "",
		rejected("import", "os").withFix("eval-import=os")),
	caseOf("import_dotted_as", imp+"eval-import=os.path\neval-attribute=join", "import os.path as p\nx = p.join('a', 'b')", "exec", "",
		value("{'x': 'a/b'}")),
	caseOf("builtin_function_self_is_builtins", "eval-call=len\neval-magic=__self__", "len.__self__", "", "",
		denied("import", "builtins").withFix(noFix)),
	caseOf("import_builtins_never", imp+"eval-import=builtins", "import builtins", "exec", "",
		rejected("import", "builtins").withFix(noFix)),
	caseOf("import_gc_never", imp+"eval-import=gc", "import gc", "exec", "", rejected("import", "gc").withFix(noFix)),
	caseOf("import_star_pattern_never_grants_ctypes", imp+"eval-import=*", "import ctypes.util", "exec", "",
		rejected("import", "ctypes.util").withFix(noFix)),
	caseOf("import_timeit_never", imp+"eval-import=*", "from timeit import timeit", "exec", "",
		rejected("import", "timeit").withFix(noFix)),
	caseOf("import_importlib_util_never", imp+"eval-import=*", "import importlib.util", "exec", "",
		rejected("import", "importlib.util").withFix(noFix)),
	caseOf("from_importlib_never", imp+"eval-import=*\neval-attribute=import_module", "from importlib import import_module", "exec", "",
		rejected("import", "importlib").withFix(noFix)),
	caseOf("import_pkgutil_never", imp+"eval-import=*", "import pkgutil", "exec", "", rejected("import", "pkgutil").withFix(noFix)),
	caseOf("import_guard_itself_never", imp+"eval-import=pysandboxes_evalguard\neval-attribute=run", "from pysandboxes_evalguard import run", "exec", "",
		rejected("import", "pysandboxes_evalguard").withFix(noFix)),
	caseOf("dunder_import_never_at_run_time", "eval-syntax=assign\neval-call=__import__\neval-import=*", "x = __import__('gc')", "exec", "",
		denied("import", "gc").withFix(noFix)),
	caseOf("supplied_module_usable", "eval-attribute=sqrt", "m.sqrt(4.0)", "", "{'m': __import__('math')}", value("2.0")),
	caseOf("supplied_module_leads_elsewhere", "eval-attribute=_os", "m._os", "", "{'m': __import__('random')}",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("getattr_default_on_module", "eval-call=getattr\neval-attribute=_os", "getattr(m, '_os', None)", "", "{'m': __import__('random')}",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("hasattr_on_module", "eval-call=hasattr\neval-attribute=_os", "hasattr(m, '_os')", "", "{'m': __import__('random')}",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("module_type_names_a_module", "eval-call=type\neval-attribute=x", "type(m)('os')", "", "{'m': __import__('math')}",
		denied("import", "os").withFix("eval-import=os")),

	// string.Formatter: guarded from the first call (see also TestGuardFromFirstCall).
	caseOf("formatter_get_field_subclasses", imp+"eval-import=string\neval-attribute=Formatter, get_field",
		"import string\nx = string.Formatter().get_field('0.__class__.__base__.__subclasses__', ((),), {})[0]()", "exec", "",
		denied("format", "__class__").withFix("eval-magic=__class__")),
	caseOf("formatter_from_import", imp+"eval-import=string\neval-attribute=Formatter, vformat\neval-call=Formatter",
		"from string import Formatter\nx = Formatter().vformat('{0.__class__}', ((),), {})", "exec", "", denied("format", "__class__")),
	caseOf("formatter_format_field_allocation", imp+"eval-import=string\neval-attribute=Formatter, format_field",
		"import string\nx = string.Formatter().format_field(1, '>1000000000')", "exec", "", interrupted("eval-max-alloc")),
	caseOf("formatter_through_dict", "eval-syntax=subscript\neval-call=vars, F\neval-magic=__dict__\neval-attribute=get_field",
		"vars(F)['get_field'](F(), '0.__class__', ((),), {})", "", "{'F': Formatter}", denied("format", "__class__")),

	// Helpers that resolve attribute names from strings go through the same gate
	// as getattr, or are refused.
	caseOf("attrgetter_dunder", imp+"eval-import=operator\neval-attribute=attrgetter", "import operator\nx = operator.attrgetter('__class__.__name__')(())", "exec", "",
		denied("magic", "__class__").withFix("eval-magic=__class__")),
	caseOf("attrgetter_self_of_len", imp+"eval-import=operator\neval-attribute=attrgetter\neval-call=len", "import operator\nx = operator.attrgetter('__self__')(len)", "exec", "",
		denied("magic", "__self__").withFix("eval-magic=__self__")),
	caseOf("attrgetter_self_of_len_magic_granted", imp+"eval-import=operator\neval-attribute=attrgetter\neval-call=len\neval-magic=__self__",
		"import operator\nx = operator.attrgetter('__self__')(len)", "exec", "", denied("import", "builtins").withFix(noFix)),
	caseOf("attrgetter_data", imp+"eval-import=operator\neval-attribute=attrgetter, real, imag", "import operator\nx = operator.attrgetter('real', 'imag')(3)", "exec", "",
		value("{'x': (3, 0)}")),
	caseOf("attrgetter_from_its_class", "eval-call=type", "type(a)('__class__')", "", "{'a': __import__('operator').attrgetter('x')}",
		denied("magic", "__class__")),
	caseOf("methodcaller_dunder", imp+"eval-import=operator\neval-attribute=methodcaller", "import operator\nx = operator.methodcaller('__reduce_ex__', 2)(())", "exec", "",
		denied("magic", "__reduce_ex__").withFix("eval-magic=__reduce_ex__")),
	caseOf("methodcaller_data", imp+"eval-import=operator\neval-attribute=methodcaller, upper", "import operator\nx = operator.methodcaller('upper')('ab')", "exec", "",
		value("{'x': 'AB'}")),
	caseOf("itemgetter_sys_modules", imp+"eval-import=operator, sys\neval-attribute=itemgetter, modules", "import operator, sys\nx = operator.itemgetter('os')(sys.modules)", "exec", "",
		denied("import", "os").withFix("eval-import=os")),
	caseOf("itemgetter_dict_door", imp+"eval-import=operator\neval-attribute=itemgetter, format\neval-call=vars, str\neval-magic=__dict__",
		"import operator\nx = operator.itemgetter('format')(vars(str))('{0.__class__}', ())", "exec", "", denied("format", "__class__")),
	caseOf("str_format_through_dict", "eval-syntax=subscript\neval-call=vars, str\neval-magic=__dict__\neval-attribute=format", "vars(str)['format']('{0.__class__}', ())", "", "",
		denied("format", "__class__")),
	caseOf("str_format_not_in_dict_without_grant", "eval-syntax=compare\neval-call=vars, str\neval-magic=__dict__", "'format' in vars(str)", "", "", value("False")),
	caseOf("vars_filtered", "eval-call=vars, sorted\neval-magic=__dict__\neval-attribute=a", "sorted(vars(o))", "", "{'o': Secret('n', 't')}",
		value("[]")),
	caseOf("vars_filtered_granted", "eval-call=vars, sorted\neval-magic=__dict__\neval-attribute=name", "sorted(vars(o))", "", "{'o': Secret('n', 't')}",
		value("['name']")),
	caseOf("vars_is_a_copy", "eval-syntax=assign, subscript\neval-call=vars\neval-magic=__dict__\neval-attribute=name", "v = vars(o)\nv['name'] = 'changed'\nx = o.name", "exec", "{'o': Secret('n', 't')}",
		value("{'v': {'name': 'changed'}, 'x': 'n'}")),
	caseOf("reduce_getattr", imp+"eval-import=functools\neval-attribute=reduce\neval-call=getattr", "import functools\nx = functools.reduce(getattr, ['__class__'], ())", "exec", "",
		denied("magic", "__class__")),
	caseOf("partial_getattr", imp+"eval-import=functools\neval-attribute=partial\neval-call=getattr", "import functools\nx = functools.partial(getattr, ())('__class__')", "exec", "",
		denied("magic", "__class__")),
	caseOf("map_getattr", "eval-call=list, map, getattr", "list(map(getattr, [()], ['__class__']))", "", "", denied("magic", "__class__")),
	caseOf("object_getattribute", "eval-call=object\neval-magic=__getattribute__", "object.__getattribute__((), '__class__')", "", "",
		denied("magic", "__class__").withFix("eval-magic=__class__")),
	caseOf("bound_getattribute", "eval-magic=__getattribute__", "().__getattribute__('__class__')", "", "", denied("magic", "__class__")),
	caseOf("super_getattribute", "eval-syntax=class, func, assign\neval-call=C, super\neval-magic=__getattribute__\neval-attribute=f",
		"class C:\n def f(self):\n  return super().__getattribute__('__class__')\nx = C().f()", "exec", "", denied("magic", "__class__")),
	caseOf("getattribute_to_module", "eval-magic=__getattribute__\neval-attribute=_os", "m.__getattribute__('_os')", "", "{'m': __import__('random')}",
		denied("import", "os")),
	caseOf("getattribute_data", "eval-magic=__getattribute__\neval-attribute=real", "(5).__getattribute__('real')", "", "", value("5")),
	caseOf("proxy_getattr", "eval-magic=__getattr__", "p.__getattr__('__class__')", "", "{'p': Proxy(())}", denied("magic", "__class__")),
	caseOf("inspect_getattr_static", imp+"eval-import=inspect\neval-attribute=getattr_static", "import inspect\nx = inspect.getattr_static((), '__class__')", "exec", "",
		denied("magic", "__class__")),
	caseOf("inspect_getattr_static_data", imp+"eval-import=inspect\neval-attribute=getattr_static, name", "import inspect\nx = inspect.getattr_static(o, 'name')", "exec", "{'o': Secret('n', 't')}",
		value("{'x': 'n'}")),
	caseOf("inspect_getmembers", imp+"eval-import=inspect\neval-attribute=getmembers", "import inspect\nx = inspect.getmembers(())", "exec", "",
		denied("helper", "inspect.getmembers").withFix(noFix)),
	caseOf("inspect_currentframe", imp+"eval-import=inspect\neval-attribute=currentframe", "import inspect\nx = inspect.currentframe()", "exec", "",
		denied("helper", "inspect.currentframe").withFix(noFix)),
	caseOf("inspect_getclosurevars", imp+"eval-import=inspect\neval-attribute=getclosurevars", "from inspect import getclosurevars", "exec", "",
		denied("helper", "inspect.getclosurevars").withFix(noFix)),
	caseOf("inspect_unwrap", imp+"eval-import=inspect\neval-attribute=unwrap\neval-call=len", "import inspect\nx = inspect.unwrap(len)", "exec", "",
		denied("magic", "__wrapped__").withFix("eval-magic=__wrapped__")),
	caseOf("inspect_signature_eval_str", imp+"eval-import=inspect\neval-attribute=signature\neval-call=len", "import inspect\nx = inspect.signature(len, eval_str=True)", "exec", "",
		denied("helper", "inspect.signature").withFix(noFix)),
	caseOf("inspect_signature", imp+"eval-import=inspect\neval-attribute=signature\neval-call=str", "import inspect\nx = str(inspect.signature(f))", "exec", "{'f': (lambda a, b=1: 0)}",
		value("{'x': '(a, b=1)'}")),
	caseOf("pickle_loads", imp+"eval-import=pickle\neval-attribute=loads", "import pickle\nx = pickle.loads(b'cos\\nsystem\\n(S\"id\"\\ntR.')", "exec", "",
		denied("helper", "pickle.loads").withFix(noFix)),
	caseOf("pickle_unpickler_private", imp+"eval-import=pickle\neval-attribute=_Unpickler", "from pickle import _Unpickler", "exec", "",
		denied("helper", "pickle._Unpickler").withFix(noFix)),
	caseOf("pickle_dumps", imp+"eval-syntax=compare\neval-import=pickle\neval-attribute=dumps, loads\neval-call=len", "import pickle\nx = len(pickle.dumps([1])) > 0", "exec", "",
		value("{'x': True}")),
	caseOf("copyreg_pickle", imp+"eval-import=copyreg\neval-attribute=pickle", "import copyreg\ncopyreg.pickle(int, f)", "exec", "{'f': len}",
		denied("helper", "copyreg.pickle").withFix(noFix)),
	caseOf("copy_deepcopy", imp+"eval-import=copy\neval-attribute=deepcopy", "import copy\nx = copy.deepcopy([1, [2]])", "exec", "",
		value("{'x': [1, [2]]}")),
	caseOf("dataclass_asdict_private_field", imp+"eval-import=dataclasses\neval-attribute=asdict, name", "import dataclasses\nx = dataclasses.asdict(s)", "exec", "{'s': Secret('n', 't')}",
		denied("attribute", "_token").withFix("eval-attribute=_token")),
	caseOf("dataclass_asdict_nested", imp+"eval-import=dataclasses\neval-attribute=astuple, items, name", "import dataclasses\nx = dataclasses.astuple(b)", "exec", "{'b': Box([Secret('n', 't')])}",
		denied("attribute", "_token")),
	caseOf("dataclass_replace", imp+"eval-import=dataclasses\neval-attribute=replace, name", "import dataclasses\nx = dataclasses.replace(s, name='m')", "exec", "{'s': Secret('n', 't')}",
		denied("attribute", "_token")),
	caseOf("dataclass_asdict", imp+"eval-import=dataclasses\neval-attribute=asdict, x, y", "import dataclasses\nx = dataclasses.asdict(p)", "exec", "{'p': Point(1, 2)}",
		value("{'x': {'x': 1, 'y': 2}}")),
	caseOf("dataclass_fields", impFn+"eval-import=dataclasses\neval-attribute=fields, name", "import dataclasses\nx = [f.name for f in dataclasses.fields(s)]", "exec", "{'s': Secret('n', 't')}",
		value("{'x': ['name', '_token']}")),
	caseOf("dataclass_make_namespace_dunder", imp+"eval-import=dataclasses\neval-attribute=make_dataclass, a", "import dataclasses\nX = dataclasses.make_dataclass('X', ['a'], namespace={'__reduce_ex__': f})", "exec", "{'f': len}",
		denied("magic", "__reduce_ex__")),
	caseOf("namedtuple_asdict_private", "eval-syntax=assign", "x = p._asdict()", "exec", "{'p': NT(1, 2)}", rejected("attribute", "_asdict").withFix("eval-attribute=_asdict")),
	caseOf("namedtuple_asdict", "eval-syntax=assign\neval-attribute=_asdict, _make", "x = p._asdict()\ny = p._make([3, 4])", "exec", "{'p': NT(1, 2)}",
		value("{'x': {'a': 1, 'b': 2}, 'y': NT(a=3, b=4)}")),
	caseOf("logging_brace_template", imp+"eval-import=logging\neval-attribute=Formatter", "import logging\nf = logging.Formatter('{msg.__class__}', style='{')", "exec", "",
		denied("format", "__class__").withFix("eval-magic=__class__")),
	caseOf("logging_brace_template_in_a_thread", impFn+"eval-import=logging\neval-attribute=Formatter, submit, result",
		"import logging\nf = X.submit(lambda: logging.Formatter('{msg.__class__}', style='{')).result()", "exec", "{'X': X}", denied("format", "__class__")),
	caseOf("logging_brace_built_by_the_executor", imp+"eval-import=logging\neval-attribute=Formatter, submit, result, format, makeLogRecord",
		"import logging\nf = X.submit(logging.Formatter, '{msg.__class__}', style='{').result()\nx = f.format(logging.makeLogRecord({'msg': 1}))", "exec", "{'X': X}",
		denied("format", "__class__")),
	caseOf("logging_brace_used_by_the_executor", imp+"eval-import=logging\neval-attribute=Formatter, submit, result, format, makeLogRecord",
		"import logging\nf = X.submit(logging.Formatter, '{msg.__class__}', style='{').result()\nx = X.submit(f.format, logging.makeLogRecord({'msg': 1})).result()", "exec", "{'X': X}",
		denied("format", "__class__")),
	caseOf("logging_percent_record", imp+"eval-import=logging\neval-attribute=Formatter, makeLogRecord, format",
		"import logging\nx = logging.Formatter('%(name)s: %(msg)s').format(logging.makeLogRecord({'msg': 'hi', 'name': 'n'}))", "exec", "", value("{'x': 'n: hi'}")),
	caseOf("logging_brace_record", imp+"eval-import=logging\neval-attribute=Formatter, makeLogRecord, format",
		"import logging\nx = logging.Formatter('{name}: {msg}', style='{').format(logging.makeLogRecord({'msg': 'hi', 'name': 'n'}))", "exec", "", value("{'x': 'n: hi'}")),
	caseOf("string_template", imp+"eval-import=string\neval-attribute=Template, substitute", "import string\nx = string.Template('$a-$b').substitute(a=1, b=2)", "exec", "",
		value("{'x': '1-2'}")),
	caseOf("re_match_expand", imp+"eval-import=re\neval-attribute=match, expand", "import re\nx = re.match('(a)(b)', 'ab').expand(r'\\2\\1')", "exec", "",
		value("{'x': 'ba'}")),
	caseOf("format_spec", "eval-call=format", "format(3.5, '>6')", "", "", value("'   3.5'")),
	caseOf("typing_string_type", imp+"eval-import=typing\neval-attribute=List", "import typing\nx = typing.List['int']", "exec", "",
		denied("helper", "typing.ForwardRef").withFix(noFix)),
	caseOf("typing_string_type_in_a_thread", impFn+"eval-import=typing\neval-attribute=List, submit, result", "import typing\nx = X.submit(lambda: typing.List[s]).result()", "exec", "{'X': X, 's': 'x'}",
		denied("helper", "typing.ForwardRef")),
	caseOf("annotation_string", "eval-syntax=func", "def f(x: '().__class__'):\n pass", "exec", "", denied("helper", "annotation").withFix(noFix)),
	caseOf("annotation_string_variable", "eval-syntax=func", "def f(x) -> s:\n pass", "exec", "{'s': 'y'}", denied("helper", "annotation")),
	caseOf("annotation_generic_string", "eval-syntax=func, subscript\neval-call=list", "def f(x: list[s]):\n pass", "exec", "{'s': 'y'}", denied("helper", "annotation")),
	caseOf("annotation_class_body", "eval-syntax=class, assign", "class C:\n x: s = 1", "exec", "{'s': 'y'}", denied("helper", "annotation")),
	caseOf("annotation_types", imp+"eval-syntax=func\neval-import=typing\neval-attribute=Literal\neval-call=int",
		"import typing\ndef f(x: int, y: typing.Literal['a']) -> int:\n return x", "exec", "", value("{}")),
	caseOf("help_resolves_names", "eval-call=help", "help('os')", "", "", denied("call", "help").withFix(noFix)),
	caseOf("function_type_refused", "eval-call=type", "type(f)", "", "{'f': (lambda: 0)}", denied("helper", "types.FunctionType").withFix(noFix)),
	caseOf("code_type_refused", "eval-call=type, compile", "type(compile('0', 'x', 'eval'))", "", "", denied("helper", "types.CodeType").withFix(noFix)),
	caseOf("operator_mul_allocation", imp+"eval-import=operator\neval-attribute=mul\neval-syntax=arith", "import operator\nx = operator.mul([0], 10**9)", "exec", "",
		interrupted("eval-max-alloc")),
	caseOf("operator_pow_allocation", imp+"eval-import=operator\neval-attribute=pow\neval-syntax=arith", "import operator\nx = operator.pow(2, 10**9)", "exec", "",
		interrupted("eval-max-alloc")),
	caseOf("operator_setitem_supplied", imp+"eval-import=operator\neval-attribute=setitem", "import operator\noperator.setitem(d, 0, 2)", "exec", "{'d': [1]}",
		denied("write", notMade)),
	caseOf("operator_iadd_supplied", imp+"eval-import=operator\neval-attribute=iadd", "import operator\nx = operator.iadd(d, [2])", "exec", "{'d': [1]}",
		denied("write", notMade)),
	caseOf("operator_iadd_own", imp+"eval-import=operator\neval-attribute=iadd\neval-call=list", "import operator\nx = operator.iadd(list(d), [2])", "exec", "{'d': [1]}",
		value("{'x': [1, 2]}")),
	caseOf("match_class_keyword_capture", "eval-syntax=Match, match_case, MatchClass, MatchAs, assign\neval-call=object, g\neval-attribute=_os, getcwd",
		"match m:\n case object(_os=o):\n  match o:\n   case object(getcwd=g):\n    x = g()", "exec", "{'m': __import__('random')}", rejected("syntax", "MatchClass").withFix(noFix)),
	caseOf("match_class_keyword_format", "eval-syntax=Match, match_case, MatchClass, MatchAs, assign\neval-call=str, f\neval-attribute=format",
		"match '{0.__class__}':\n case str(format=f):\n  x = f(())", "exec", "", rejected("syntax", "MatchClass")),
	caseOf("match_class_keyword_compare", "eval-syntax=Match, match_case, MatchClass, MatchValue, assign\neval-call=Point\neval-attribute=x",
		"match p:\n case Point(x=1):\n  r = 1", "exec", "{'p': Point(1, 2), 'Point': Point}", value("{'r': 1}")),

	// Augmented assignment: for every operator and every target form, charged like
	// the operator and refused when it would change an object the application
	// supplied in place (an attribute target is refused statically: the
	// sub-language never mutates attributes).
	caseOf("augmented_name_alias_of_supplied", "eval-syntax=assign", "b = d\nb *= 2", "exec", "{'d': [1]}", denied("write", notMade).withFix(noFix)),
	caseOf("augmented_name_supplied", "eval-syntax=assign", "d += [2]", "exec", "{'d': [1]}", denied("write", notMade)),
	caseOf("augmented_set_or", "eval-syntax=assign", "b = s\nb |= {2}", "exec", "{'s': {1}}", denied("write", notMade)),
	caseOf("augmented_set_sub", "eval-syntax=assign", "b = s\nb -= {1}", "exec", "{'s': {1}}", denied("write", notMade)),
	caseOf("augmented_set_and", "eval-syntax=assign\neval-call=set", "b = s\nb &= set()", "exec", "{'s': {1}}", denied("write", notMade)),
	caseOf("augmented_set_xor", "eval-syntax=assign", "b = s\nb ^= {1}", "exec", "{'s': {1}}", denied("write", notMade)),
	caseOf("augmented_dict_or", "eval-syntax=assign", "b = d\nb |= {'k': 1}", "exec", "{'d': {}}", denied("write", notMade)),
	caseOf("augmented_subscript_nested_supplied", "eval-syntax=assign, subscript", "x = {'a': d}\nx['a'] += [2]", "exec", "{'d': [1]}", denied("write", notMade)),
	caseOf("augmented_subscript_supplied_container", "eval-syntax=assign, subscript", "d[0] += 1", "exec", "{'d': [1]}", denied("write", notMade)),
	caseOf("augmented_parameter_supplied", "eval-syntax=assign, func\neval-call=f", "def f(b):\n b += [1]\nf(d)", "exec", "{'d': [1]}", denied("write", notMade)),
	caseOf("augmented_supplied_in_nested_exec", "eval-syntax=assign\neval-call=exec", "exec('b += [1]', {'b': d})", "exec", "{'d': [1]}", denied("write", notMade)),
	caseOf("method_extend_supplied", "eval-syntax=assign\neval-attribute=extend", "b = d\nb.extend([2])", "exec", "{'d': [1]}", denied("write", notMade).withFix(noFix)),
	caseOf("method_unbound_append_supplied", "eval-call=list\neval-attribute=append", "list.append(d, 2)", "", "{'d': [1]}", denied("write", notMade)),
	caseOf("method_dict_pop_supplied", "eval-syntax=subscript\neval-attribute=pop", "d['k'].pop()", "", "{'d': {'k': [1]}}", denied("write", notMade)),
	caseOf("method_deque_supplied", "eval-attribute=appendleft", "q.appendleft(0)", "", "{'q': __import__('collections').deque([1])}", denied("write", notMade)),
	caseOf("method_methodcaller_supplied", imp+"eval-import=operator\neval-attribute=methodcaller, sort", "import operator\noperator.methodcaller('sort')(d)", "exec", "{'d': [2, 1]}",
		denied("write", notMade)),
	caseOf("method_on_own_copy", "eval-syntax=assign\neval-call=list\neval-attribute=extend, append, get", "e = list(d)\ne.extend([2])\nlist.append(e, 3)\nx = g.get('k')", "exec", "{'d': [1], 'g': {'k': 4}}",
		value("{'e': [1, 2, 3], 'x': 4}")),
	caseOf("augmented_attribute", "eval-syntax=assign", "o.x += 1", "exec", "{'o': O()}", rejected("attribute", "x").withFix(noFix)),
	caseOf("augmented_immutable_supplied", "eval-syntax=assign", "b = n\nb *= 2\nt = u\nt += (2,)\ns = w\ns += 'b'", "exec", "{'n': 3, 'u': (1,), 'w': 'a'}",
		value("{'b': 6, 't': (1, 2), 's': 'ab'}")),
	caseOf("augmented_own_copies", "eval-syntax=assign\neval-call=list, set, dict", "b = list(d)\nb *= 2\ns = set(d)\ns |= {2}\ne = dict(k=1)\ne |= {'j': 2}", "exec", "{'d': [1]}",
		value("{'b': [1, 1], 's': {1, 2}, 'e': {'k': 1, 'j': 2}}")),
	caseOf("augmented_every_operator", "eval-syntax=assign", "x = 100\nx -= 1\nx //= 3\nx %= 30\nx **= 2\nx <<= 2\nx >>= 1\nx |= 1\nx ^= 3\nx &= 255\nx /= 2", "exec", "",
		value("{'x': 8.0}")),
	caseOf("augmented_allocation_own", "eval-syntax=assign\neval-max-alloc=1000", "a = [0]\na *= 10000", "exec", "", interrupted("eval-max-alloc")),
	caseOf("augmented_shift_allocation", "eval-syntax=assign, arith", "a = 1\na <<= 10**9", "exec", "", interrupted("eval-max-alloc")),
}

// TestSideDoors: every side door of the family is closed with the refusal that
// names the mechanism and the rule, and the payloads that must run still run.
func TestSideDoors(t *testing.T) { checkMatrix(t, sideDoors) }

// firstCalls: the process-wide guards of string.Formatter, logging's '{' style
// and typing's string types hold from the first call an evaluation makes, in an
// interpreter where the evaluation itself loads the module (or where the
// application loaded it and no evaluation ran yet), whatever the route to the
// method.
var firstCalls = []matrixCase{
	caseOf("first_get_field", imp+"eval-import=string\neval-attribute=Formatter, get_field",
		"import string\nx = string.Formatter().get_field('0.__class__.__base__.__subclasses__', ((),), {})[0]()", "exec", "", denied("format", "__class__")),
	caseOf("first_get_field_from_import", imp+"eval-import=string\neval-attribute=Formatter, get_field\neval-call=Formatter",
		"from string import Formatter\nx = Formatter().get_field('0.__class__', ((),), {})", "exec", "", denied("format", "__class__")),
	caseOf("first_get_field_getattr", imp+"eval-import=string\neval-attribute=Formatter, get_field\neval-call=getattr",
		"import string\nx = getattr(string.Formatter(), 'get_field')('0.__class__', ((),), {})", "exec", "", denied("format", "__class__")),
	caseOf("first_get_field_methodcaller", imp+"eval-import=string, operator\neval-attribute=Formatter, methodcaller, get_field",
		"import string, operator\nx = operator.methodcaller('get_field', '0.__class__', ((),), {})(string.Formatter())", "exec", "", denied("format", "__class__")),
	caseOf("first_vformat_unbound", imp+"eval-import=string\neval-attribute=Formatter, vformat\neval-call=F",
		"import string\nF = string.Formatter\nx = F.vformat(F(), '{0.__class__}', ((),), {})", "exec", "", denied("format", "__class__")),
	caseOf("first_format", imp+"eval-import=string\neval-attribute=Formatter, format",
		"import string\nx = string.Formatter().format('{0.__class__}', ())", "exec", "", denied("format", "__class__")),
	caseOf("first_get_field_supplied", "eval-attribute=get_field", "F.get_field('0.__class__', ((),), {})", "", "{'F': __import__('string').Formatter()}",
		denied("format", "__class__")),
	caseOf("first_logging_brace", imp+"eval-import=logging\neval-attribute=Formatter",
		"import logging\nf = logging.Formatter('{msg.__class__}', style='{')", "exec", "", denied("format", "__class__")),
	caseOf("first_typing_string", imp+"eval-import=typing\neval-attribute=Optional", "from typing import Optional\nx = Optional['x']", "exec", "",
		denied("helper", "typing.ForwardRef")),
	caseOf("first_get_field_data", imp+"eval-import=string\neval-attribute=Formatter, get_field, real",
		"import string\nx = string.Formatter().get_field('0.real', (5,), {})", "exec", "", value("{'x': (5, 0)}")),

	// A module imported anew (the application removed it from sys.modules) is
	// another object: its helpers and patches are in place before the code can
	// use them; reload (same object, new code) is refused.
	caseOf("reimported_inspect", reimport+"eval-import=sys, inspect\neval-attribute=modules, getmembers",
		"import sys, inspect\nforget('inspect')\nimport inspect\nx = inspect.getmembers(())", "exec", forget, denied("helper", "inspect.getmembers")),
	caseOf("reimported_classmethod_helper", reimport+"eval-import=sys, inspect\neval-attribute=modules, Signature, from_callable",
		"import sys, inspect\nforget('inspect')\nimport inspect\nx = inspect.Signature.from_callable(f, eval_str=True)", "exec", "{'f': len, 'forget': __import__('sys').modules.pop}",
		denied("helper", "inspect.Signature.from_callable")),
	caseOf("reimported_logging", reimport+"eval-import=sys, logging\neval-attribute=modules, Formatter",
		"import sys, logging\nforget('logging')\nimport logging\nf = logging.Formatter('{msg.__class__}', style='{')", "exec", forget, denied("format", "__class__")),
	caseOf("reimported_string", reimport+"eval-import=sys, string\neval-attribute=modules, Formatter, get_field",
		"import sys, string\nforget('string')\nimport string\nx = string.Formatter().get_field('0.__class__', ((),), {})", "exec", forget, denied("format", "__class__")),
	caseOf("reload_refused", imp+"eval-import=importlib, inspect\neval-attribute=reload", "import importlib, inspect\ninspect = importlib.reload(inspect)", "exec", "",
		rejected("import", "importlib").withFix(noFix)),
}

// reimport: the syntax the re-import cases need; forget: a function of the
// application that removes a module from sys.modules (evaluated code cannot
// change sys.modules itself).
const (
	reimport = "eval-syntax=import, assign, subscript\neval-call=forget\n"
	forget   = "{'forget': __import__('sys').modules.pop}"
)

// TestGuardFromFirstCall: each case runs in its own fresh interpreter (see
// firstCalls), the re-import cases too (they rewrite sys.modules).
func TestGuardFromFirstCall(t *testing.T) {
	needPython(t)
	for _, c := range firstCalls {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			r := runFresh(t, runCase{ID: c.id, Profile: profileOf(t, c.rules, "").Python(), Src: c.src, Mode: c.mode, Names: c.names})
			if c.names == "" && r.Type != "" {
				t.Fatalf("%s were loaded before the evaluation", r.Type)
			}
			checkOutcome(t, c, r)
		})
	}
}

// TestRuntimeFixLines: the rule line a refusal carries, static or at run time,
// is the one that lifts it: pasting each one in turn into the policy makes the
// payload run to its value (modules reached through another module, through
// sys.modules or __import__, names resolved by a helper from strings).
func TestRuntimeFixLines(t *testing.T) {
	type fixCase struct {
		id, rules, src, want string
		pasted               []string
	}
	cases := []*fixCase{
		{id: "module through from-import", rules: imp + "eval-import=json", src: "from json import codecs\nx = codecs.encode('a', 'rot13')", want: "{'x': 'n'}"},
		{id: "module through sys.modules", rules: imp + "eval-import=sys", src: "import sys\nx = sys.modules['string'].capwords('a b')", want: "{'x': 'A B'}"},
		{id: "private module name", rules: imp + "eval-import=random", src: "from random import _os\nx = _os.sep", want: "{'x': '/'}"},
		{id: "dunder import", rules: "eval-syntax=assign\neval-call=__import__", src: "x = __import__('json').dumps(1)", want: "{'x': '1'}"},
		{id: "attrgetter", rules: imp + "eval-import=operator", src: "import operator\nx = operator.attrgetter('__doc__')(d)[:5]", want: "{'x': 'Built'}"},
		{id: "object.__getattribute__", rules: "eval-call=object", src: "x = object.__getattribute__(3, 'real')", want: "{'x': 3}"},
		{id: "augmented own list", rules: declared, src: "b = list(d)\nb += [2]", want: "{'b': [1, 2]}"},
		{id: "class made by a metaclass", rules: imp + "eval-syntax=func", src: "import abc\nA = type(abc.ABC)('A', (), {'__len__': lambda s: 3})\nx = 1", want: "{'x': 1}"},
		{id: "make_dataclass namespace", rules: imp + "eval-syntax=func", src: "import dataclasses\nD = dataclasses.make_dataclass('D', ['a'], namespace={'__eq__': lambda s, o: True})\nx = 1", want: "{'x': 1}"},
	}
	pending := cases
	for round := 0; len(pending) > 0; round++ {
		if round == 6 {
			for _, c := range pending {
				t.Errorf("%s: still refused after pasting %q", c.id, c.pasted)
			}
			return
		}
		var run []runCase
		for _, c := range pending {
			run = append(run, runCase{ID: c.id, Profile: profileOf(t, c.rules, "").Python(), Src: c.src, Mode: "exec", Names: "{'d': [1]}"})
		}
		got := runAll(t, run)
		var next []*fixCase
		for _, c := range pending {
			r := got[c.id]
			var fixes []string
			switch r.Outcome {
			case "value":
				if r.Value != c.want {
					t.Errorf("%s: value %s, want %s", c.id, r.Value, c.want)
				}
				continue
			case "rejected":
				for _, v := range r.Violations {
					fixes = append(fixes, pasteable(v.Fix))
				}
			case "denied":
				fixes = []string{r.Fix}
			default:
				t.Errorf("%s: %+v", c.id, r)
				continue
			}
			for _, f := range fixes {
				if f == "" {
					t.Errorf("%s: a refusal with no fix: %s", c.id, r.Message)
					fixes = nil
					break
				}
			}
			if fixes == nil {
				continue
			}
			for _, f := range fixes {
				c.rules = paste(c.rules, f)
				c.pasted = append(c.pasted, f)
			}
			next = append(next, c)
		}
		pending = next
	}
	for _, c := range cases {
		t.Logf("%s: %q", c.id, c.pasted)
	}
}
