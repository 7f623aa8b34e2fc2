package evalguard

import (
	"strings"
	"testing"
)

// reg: the syntax of the registry cases.
const reg = "eval-syntax=import, assign, subscript, func, compare, arith, Delete, loop, conditional, exception\n"

// registries: evaluated code does not change what the rest of the process
// relies on, in a module it may import or not: the containers a module holds
// (sys.modules, sys.path, os.environ, copyreg's and pickle's dispatch tables,
// warnings.filters...) by any write (the write rule: they are not the
// evaluation's), its attributes (never set: statically, and through
// __setattr__, update_wrapper), and the functions that register hooks or set
// process-wide state (refused by name, no rule grants them). The last case
// checks, in the same interpreter, that nothing changed.
var registries = []matrixCase{
	caseOf("sys_modules_store", reg+"eval-import=sys\neval-attribute=modules", "import sys\nsys.modules['x'] = sys", "exec", "",
		denied("write", "sys.modules").withFix(noFix)),
	caseOf("sys_modules_delete", reg+"eval-import=sys\neval-attribute=modules", "import sys\nm = sys.modules\ndel m['json']", "exec", "", denied("write", "sys.modules")),
	caseOf("sys_modules_pop", reg+"eval-import=sys\neval-attribute=modules, pop", "import sys\nsys.modules.pop('json')", "exec", "", denied("write", "sys.modules")),
	caseOf("sys_path_append", reg+"eval-import=sys\neval-attribute=path, append", "import sys\nsys.path.append('/tmp/x')", "exec", "", denied("write", "sys.path").withFix(noFix)),
	caseOf("sys_path_insert_from_import", reg+"eval-import=sys\neval-attribute=path, insert", "from sys import path\npath.insert(0, '/tmp/x')", "exec", "", denied("write", "sys.path")),
	caseOf("sys_path_slice", reg+"eval-import=sys\neval-attribute=path", "import sys\np = sys.path\np[:] = []", "exec", "", denied("write", "sys.path")),
	caseOf("sys_path_augmented", reg+"eval-import=sys\neval-attribute=path", "import sys\np = sys.path\np += ['/tmp/x']", "exec", "", denied("write", "sys.path")),
	caseOf("sys_path_unbound_append", reg+"eval-import=sys\neval-attribute=path, append\neval-call=list", "import sys\nlist.append(sys.path, '/tmp/x')", "exec", "", denied("write", "sys.path")),
	caseOf("sys_path_operator_setitem", reg+"eval-import=sys, operator\neval-attribute=path, setitem", "import sys, operator\noperator.setitem(sys.path, 0, '/tmp/x')", "exec", "",
		denied("write", "sys.path")),
	caseOf("sys_meta_path", reg+"eval-import=sys\neval-attribute=meta_path, insert", "import sys\nsys.meta_path.insert(0, f)", "exec", "{'f': len}", denied("write", "sys.meta_path")),
	caseOf("sys_path_hooks", reg+"eval-import=sys\neval-attribute=path_hooks, append", "import sys\nsys.path_hooks.append(f)", "exec", "{'f': len}", denied("write", "sys.path_hooks")),
	caseOf("sys_path_importer_cache", reg+"eval-import=sys\neval-attribute=path_importer_cache, clear", "import sys\nsys.path_importer_cache.clear()", "exec", "",
		denied("write", "sys.path_importer_cache")),
	caseOf("sys_excepthook", reg+"eval-import=sys\neval-attribute=excepthook", "import sys\nsys.excepthook = f", "exec", "{'f': len}", rejected("attribute", "excepthook").withFix(noFix)),
	caseOf("sys_displayhook_setattr", reg+"eval-import=sys\neval-call=object\neval-magic=__setattr__", "import sys\nobject.__setattr__(sys, 'displayhook', f)", "exec", "{'f': len}",
		denied("attribute", "__setattr__").withFix(noFix)),
	caseOf("sys_setrecursionlimit", reg+"eval-import=sys\neval-attribute=setrecursionlimit", "import sys\nsys.setrecursionlimit(50)", "exec", "",
		denied("helper", "sys.setrecursionlimit").withFix(noFix)),
	caseOf("sys_settrace", reg+"eval-import=sys\neval-attribute=settrace", "import sys\nsys.settrace(f)", "exec", "{'f': len}", denied("helper", "sys.settrace")),
	caseOf("sys_setprofile", reg+"eval-import=sys\neval-attribute=setprofile", "from sys import setprofile", "exec", "", denied("helper", "sys.setprofile")),
	caseOf("environ_store", reg+"eval-import=os\neval-attribute=environ", "import os\nos.environ['EVALGUARD_X'] = '1'", "exec", "", denied("write", "os.environ").withFix(noFix)),
	caseOf("environ_update", reg+"eval-import=os\neval-attribute=environ, update", "import os\nos.environ.update(EVALGUARD_X='1')", "exec", "", denied("write", "os.environ")),
	caseOf("environ_mutable_mapping", reg+"eval-import=os, collections, collections.abc\neval-attribute=environ, abc, MutableMapping, setdefault",
		"import os, collections.abc\ncollections.abc.MutableMapping.setdefault(os.environ, 'EVALGUARD_X', '1')", "exec", "", denied("write", "os.environ")),
	caseOf("environ_putenv", reg+"eval-import=os\neval-attribute=putenv", "import os\nos.putenv('EVALGUARD_X', '1')", "exec", "", denied("helper", "os.putenv")),
	caseOf("environ_copy_is_own", reg+"eval-import=os\neval-attribute=environ, copy, get", "import os\ne = os.environ.copy()\ne['EVALGUARD_X'] = '1'\nx = e.get('EVALGUARD_X')\ndel e", "exec", "",
		value("{'x': '1'}")),
	caseOf("chdir", reg+"eval-import=os\neval-attribute=chdir", "import os\nos.chdir('/')", "exec", "", denied("helper", "os.chdir")),
	caseOf("atexit_register", reg+"eval-import=atexit\neval-attribute=register", "import atexit\natexit.register(f)", "exec", "{'f': len}", denied("helper", "atexit.register").withFix(noFix)),
	caseOf("signal_signal", reg+"eval-import=signal\neval-attribute=signal, SIGUSR1", "import signal\nsignal.signal(signal.SIGUSR1, f)", "exec", "{'f': len}",
		denied("helper", "signal.signal")),
	caseOf("threading_excepthook", reg+"eval-import=threading\neval-attribute=excepthook", "import threading\nthreading.excepthook = f", "exec", "{'f': len}",
		rejected("attribute", "excepthook")),
	caseOf("threading_settrace", reg+"eval-import=threading\neval-attribute=settrace", "import threading\nthreading.settrace(f)", "exec", "{'f': len}", denied("helper", "threading.settrace")),
	caseOf("warnings_showwarning", reg+"eval-import=warnings\neval-attribute=showwarning", "import warnings\nwarnings.showwarning = f", "exec", "{'f': len}",
		rejected("attribute", "showwarning")),
	caseOf("warnings_simplefilter", reg+"eval-import=warnings\neval-attribute=simplefilter", "import warnings\nwarnings.simplefilter('ignore')", "exec", "",
		denied("helper", "warnings.simplefilter")),
	caseOf("warnings_filters", reg+"eval-import=warnings\neval-attribute=filters, insert", "import warnings\nwarnings.filters.insert(0, ('ignore', None, Warning, None, 0))", "exec", "{'Warning': Warning}",
		denied("write", "warnings.filters")),
	caseOf("codecs_register", reg+"eval-import=codecs\neval-attribute=register", "import codecs\ncodecs.register(f)", "exec", "{'f': len}", denied("helper", "codecs.register")),
	caseOf("copyreg_dispatch_table", reg+"eval-import=copyreg\neval-attribute=dispatch_table", "import copyreg\ncopyreg.dispatch_table[O] = f", "exec", "{'O': O, 'f': len}",
		denied("write", "copyreg.dispatch_table")),
	caseOf("pickle_dispatch_table", reg+"eval-import=pickle\neval-attribute=dispatch_table", "import pickle\npickle.dispatch_table[O] = f", "exec", "{'O': O, 'f': len}",
		denied("write", "pickle.dispatch_table")),
	caseOf("pickle_pickler_dispatch", reg+"eval-import=pickle\neval-attribute=_Pickler, dispatch", "import pickle\npickle._Pickler.dispatch[O] = f", "exec", "{'O': O, 'f': len}",
		denied("write", "pickle._Pickler.dispatch")),
	caseOf("copy_dispatch", reg+"eval-import=copy\neval-attribute=_deepcopy_dispatch", "import copy\ncopy._deepcopy_dispatch[O] = f", "exec", "{'O': O, 'f': len}",
		denied("write", "copy._deepcopy_dispatch")),
	caseOf("json_encoder_hook", reg+"eval-import=json, json.encoder\neval-attribute=encoder, c_make_encoder", "import json.encoder\njson.encoder.c_make_encoder = None", "exec", "",
		rejected("attribute", "c_make_encoder")),
	caseOf("json_vars_is_a_copy", reg+"eval-import=json\neval-attribute=dumps\neval-call=vars\neval-magic=__dict__", "import json\nv = vars(json)\nv['dumps'] = f\nx = json.dumps(1)", "exec", "{'f': len}",
		value("{'v': {'dumps': <built-in function len>}, 'x': '1'}")),
	caseOf("module_update_wrapper", reg+"eval-import=functools, json\neval-attribute=update_wrapper", "import functools, json\nfunctools.update_wrapper(json, f, assigned=('dumps',))", "exec", "{'f': len}",
		denied("write", "json").withFix(noFix)),
	caseOf("supplied_builtins_update_wrapper", reg+"eval-import=functools\neval-attribute=update_wrapper", "import functools\nfunctools.update_wrapper(b, f, assigned=('len',))", "exec",
		"{'b': __import__('builtins'), 'f': print}", denied("write", "builtins")),
	caseOf("random_seed", reg+"eval-import=random\neval-attribute=seed", "import random\nrandom.seed(1)", "exec", "", denied("helper", "random.seed")),
	caseOf("random_own_generator", reg+"eval-import=random\neval-attribute=Random, seed, random", "import random\nr = random.Random()\nr.seed(1)\nx = r.random() < 1\ndel r", "exec", "",
		value("{'x': True}")),
	caseOf("decimal_setcontext", reg+"eval-import=decimal\neval-attribute=setcontext, Context", "import decimal\ndecimal.setcontext(decimal.Context(prec=3))", "exec", "",
		denied("helper", "decimal.setcontext")),
	caseOf("decimal_traps", reg+"eval-import=decimal\neval-attribute=getcontext, traps, Inexact", "import decimal\ndecimal.getcontext().traps[decimal.Inexact] = True", "exec", "",
		denied("write", notMade)),
	caseOf("weakref_finalize", reg+"eval-import=weakref\neval-attribute=finalize", "import weakref\nweakref.finalize(O, f)", "exec", "{'O': O, 'f': len}", denied("helper", "weakref.finalize")),
	caseOf("logging_basic_config", reg+"eval-import=logging\neval-attribute=basicConfig", "import logging\nlogging.basicConfig()", "exec", "", denied("helper", "logging.basicConfig")),
	caseOf("abc_register_library", reg+"eval-import=collections, collections.abc\neval-attribute=abc, Sequence, register", "import collections.abc\ncollections.abc.Sequence.register(O)", "exec", "{'O': O}",
		denied("write", "Sequence")),
	caseOf("enum_global", reg+"eval-import=enum\neval-attribute=global_enum, Enum", "import enum\nE = enum.global_enum(enum.Enum('E', 'a', module='json'))", "exec", "",
		denied("helper", "enum.global_enum")),
	caseOf("typing_overload", reg+"eval-import=typing\neval-attribute=overload", "import typing\ng = typing.overload(f)", "exec", "{'f': len}", denied("helper", "typing.overload")),
	caseOf("singledispatch_of_a_module", reg+"eval-import=importlib, importlib.resources\neval-attribute=resources, as_file, register",
		"import importlib.resources\nr = importlib.resources.as_file.register", "exec", "", denied("write", "functools.singledispatch").withFix(noFix)),
	caseOf("singledispatch_of_its_own", reg+"eval-import=functools\neval-attribute=singledispatch, register\neval-call=g, int, str",
		"import functools\ng = functools.singledispatch(f)\ng.register(int, str)\nx = (g(1), g([]))\ndel g", "exec", "{'f': len}", value("{'x': ('1', 0)}")),
	caseOf("nested_exec_into_supplied_dict", reg+"eval-call=exec", "exec('x = 1', d)", "exec", "{'d': {}}", denied("write", notMade)),
	caseOf("nested_exec_own_dict", reg+"eval-call=exec", "g = {}\nexec('y = 1', g)\nx = g['y']\ndel g", "exec", "", value("{'x': 1}")),
	caseOf("guard_helper_from_nested_namespace", reg+"eval-call=exec", "g = {}\nexec('y = 1', g)\nh = g['__sb_own__']", "exec", "", denied("frame", "__sb_own__").withFix(noFix)),
	caseOf("guard_builtins_from_nested_namespace", reg+"eval-call=exec", "g = {}\nexec('y = 1', g)\nb = g['__builtins__']\nb['exec'] = 1", "exec", "", denied("write", notMade)),
	// Nothing changed in this interpreter.
	caseOf("nothing_changed", reg+"eval-import=sys, os, random\neval-attribute=path, modules, environ, get, getrecursionlimit, gettrace, dispatch_table, filters, random",
		"import sys, os, copyreg, warnings\nx = ('/tmp/x' in sys.path, 'x' in sys.modules, 'json' in sys.modules, os.environ.get('EVALGUARD_X'), sys.getrecursionlimit() > 50, sys.gettrace(), O in copyreg.dispatch_table)",
		"exec", "{'O': O}", value("{'x': (False, False, True, None, True, None, False)}")),
}

// TestProcessRegistries: see registries.
func TestProcessRegistries(t *testing.T) {
	for i, c := range registries {
		if c.id == "nothing_changed" {
			registries[i].rules = strings.Replace(c.rules, "eval-import=sys, os, random", "eval-import=sys, os, random, copyreg, warnings", 1)
		}
	}
	checkMatrix(t, registries)
}
