// Package evalguard is the eval layer of pysandboxes: it decides what code given as
// a string (to eval, exec or compile, or to Sandbox.Eval) may do, following the
// eval-* rules of a policy.
//
// A profile (the default one, or a named one declared with eval-<key>:<name>=) is a
// whitelisted sub-language: the ast node classes the code may use (eval-syntax), the
// names it may call (eval-call, also the only source of its builtins), the ordinary
// and dunder attributes it may read (eval-attribute, eval-magic), the modules it may
// import (eval-import), how a caller's namespace is treated (eval-namespace) and its
// budgets (eval-timeout, eval-max-iterations, eval-max-call-depth, eval-max-depth,
// eval-max-nodes, eval-max-alloc). Profile carries it; Profile.Python gives the
// plain-data form the Python side reads.
//
// The authoritative check runs in Python, with CPython's own parser (no parser
// differential): the embedded module pysandboxes_evalguard (Files, Module) parses
// the source, reports every violation at once with a paste-ready rule line, then
// rewrites the tree so that attribute reads, calls, subscripts, allocating
// operators, augmented assignments, loops, comprehensions, annotations and
// function definitions go through runtime helpers that gate names and values and
// charge budgets, and runs it. The Python layer (package pylayer) ships the module
// into every sandboxed interpreter whose policy declares a default eval profile,
// and routes the builtins eval, exec and compile through it.
//
// This package's Go API gives a static verdict (Check, Checker), the typed errors of
// the guard (RejectedError, InterruptedError, DeniedError) and FromRemote, which
// turns the descriptor of an exception raised in a sandboxed interpreter back into
// them. The hard limits that only a supervisor can give (a wall-clock kill, a memory
// ceiling) belong to the sandbox that runs the evaluation.
//
// # The gates
//
// Every refusal names the rule line that would lift it (Violation.Fix,
// DeniedError.Fix), or says that no eval- rule grants it.
//
// The attribute gate judges every attribute name evaluated code reads, whatever
// the route: o.n, getattr (its default never swallows a refusal), hasattr, vars
// and __dict__, the fields of a str.format template, a name taken by from-import
// (`from json import dumps` needs eval-attribute=dumps), and every helper that
// resolves a name from a string (below). Frame-capture names and the evaluation's
// own machinery (__globals__, __code__, __closure__, __builtins__) are always
// refused; a dunder needs eval-magic; any other name, a private one included,
// needs eval-attribute (format and format_map only by their exact name).
//
// The module gate judges every module evaluated code reaches: it passes when
// eval-import allows its name (or the dotted name it is registered under and was
// reached by, as os.path), or when the application supplied it (in the names, or
// in the caller's globals under eval-namespace=adaptive). It applies to a module
// reached by any route: an import, a from-import, an attribute of a module or of
// a function (len.__self__ is the builtins module), what a call returns
// (importlib.import_module, sys.modules.get, __import__ granted by eval-call, which
// is the guarded import too), a subscript (sys.modules['os']), an item a
// comprehension iterates, and a module the code holds however it got it
// (unpacking, a for loop) as soon as it reads an attribute from it. `import a.b`
// binds a, so a must be granted as well. Some modules are never granted, whatever
// the rules: builtins (grant builtins one by one with eval-call), gc, ctypes, the
// modules that run source text (code, codeop, timeit, pdb, bdb, cProfile, profile,
// trace, doctest, runpy, rlcompleter), pydoc, shelve, logging.config,
// unittest.mock, the import system's loaders (importlib.util, importlib.machinery,
// importlib.abc, importlib's bootstrap modules, imp, zipimport: they run a file's
// source outside the guard), pkgutil and the guard itself, with their
// submodules; and importlib itself (import_module and reload import modules named
// by strings), whose importlib.resources and importlib.metadata are judged on
// their own.
//
// The value gate sees what a call returns, a subscript, an item a comprehension
// iterates, every attribute and what a decorator returns: a module meets the
// module gate; a class, or the class of an object, meets the class gate; a
// helper that resolves names or source from strings is replaced by its gated
// form or refused; the guard's own helpers are refused. Annotations pass it
// too: a string type is refused.
//
// The class gate: a class evaluated code makes defines special methods (the
// dunders the interpreter calls implicitly: comparisons, hashing, formatting,
// iteration, __del__, __getattr__, __reduce__, __index__, descriptors'
// __get__, __init_subclass__, __set_name__, __class_getitem__,
// __instancecheck__...) only as a class statement that defines them could:
// each needs eval-magic, and the class then needs eval-syntax=class, whatever
// built it. It judges the class itself, not the factory: every class that
// reaches evaluated code (what a call returns, a subscript, an item, an
// attribute, a decorator's result, a class statement's result, the class of an
// object the code reads from or receives) is judged once, and again when its
// __dict__ changes, with its metaclass and its bases, before the code can
// hold it. So a metaclass call (type(abc.ABC)(name, bases, ns), a metaclass
// the application supplied, ABCMeta.__new__), types.new_class and
// prepare_class, the functional Enum API (Enum, IntEnum, Flag...),
// namedtuple, typing.NamedTuple, make_dataclass, dataclasses.dataclass and
// functools.total_ordering meet the same gate. A dunder is defined by the
// code when its value is the code's: a function of evaluated code or anything
// wrapping one (a lambda, a partial, a staticmethod, a property), a method
// bound to an object, a slot named in __slots__, or any object the code held
// (it passed the value gate, it is a builtin of eval-call, the application
// supplied it: `Enum('E', [('__del__', print)])`, `{'__hash__': os.getcwd}`).
// It is the library's own implementation when it is the object a base class
// holds under that name, a function or built-in of the library bearing that
// name, what the factory made itself and the code never held (namedtuple's
// and attrs' methods, a dataclass's __eq__ and __replace__, total_ordering's
// comparisons), data (neither callable nor a descriptor: __hash__ = None,
// __match_args__), the descriptors type() makes for __dict__ and __weakref__,
// or types.GenericAlias as __class_getitem__. Metadata dunders (__doc__,
// __module__, __annotations__, __signature__, __wrapped__...) are defined by
// the code only when their value involves evaluated code. Trusted, and not
// judged: the classes a module defines (reached by their qualified name in
// their module: evaluated code cannot bind names in a module or in
// sys.modules), the classes the application supplied and those of the objects
// it supplied, the classes of the interpreter and of extensions.
//
// Writes: evaluated code writes only into what it made, and nothing is walked
// to decide it. It made a display or a comprehension, what a call, an operator
// or a slice returns that nothing else holds, and what only such an object
// holds (read from it through a subscript, an attribute or a comprehension, or
// nested in what a call built: json.loads, copy.deepcopy, a defaultdict's new
// value). The reference count says it exactly at the helpers (checked when the
// module loads; on an interpreter where it differs, only displays and
// comprehensions are the code's). Anything else is not its to change, however
// large and however the code got hold of it: the application's data (the
// names, the caller's globals and locals, what they hold, an object's
// attributes), a module's registries (sys.modules, sys.path, sys.meta_path,
// sys.path_hooks, sys.path_importer_cache, os.environ, copyreg.dispatch_table,
// pickle's dispatch tables, warnings.filters, any container a module or a
// module's class holds), an item a library handed back (sorted(rows)[0],
// max(rows), functools.reduce(operator.getitem, ...)), an item of a shallow
// copy ([*rows][0], {**d}, copy.copy), a parameter a library passes to a
// callback, a memoryview of such an object. The write routes: a subscript
// store or delete, an augmented assignment that would change its target in
// place (whatever the operator and the target: `b = rows; b += [1]` like
// `rows[0] += 1`), a method that changes a container in place (bound,
// unbound, through super(), operator.methodcaller, vars(list)['append'];
// `list.append(sys.path, x)`, `MutableMapping.update(os.environ, d)`), a
// method that fills a buffer (readinto, recv_into, pack_into),
// operator.setitem, delitem and the i* functions, random.shuffle, heapq,
// bisect.insort, struct.pack_into, os.readv, exec or eval binding names in a
// dict (they bind only in a dict the code made: they run in a copy of it that
// holds the guard's builtins and helpers, and bind back what they bound, so no
// dict the code holds ever holds the guard's helpers). Its own copies
// (list(rows), dict(d), os.environ.copy()) are its to change. An augmented
// assignment is charged to eval-max-alloc like its operator, whatever its
// target; an attribute target is refused statically, like every attribute
// store, and the sub-language never sets attributes by any route: setattr,
// __setattr__ and __delattr__ (object's, type's, super()'s) are refused, and
// the helpers that set attributes on their argument (functools.update_wrapper
// and wraps, total_ordering, dataclasses.dataclass, abc.update_abstractmethods
// and abstractmethod, typing.final, no_type_check, runtime_checkable,
// types.coroutine) work only on a function or a class evaluated code made
// (names beyond update_wrapper's defaults pass the attribute gate).
//
// Process-wide state: what the rest of the process relies on (the
// application, its later evaluations, the zygote) is never changed. Besides
// the registries above (writes) and the attributes of modules (never set),
// the functions that register hooks or set process-wide state are refused
// (no eval- rule grants them): sys.setrecursionlimit, settrace, setprofile,
// setswitchinterval, set_int_max_str_digits, set_asyncgen_hooks,
// addaudithook and sys.monitoring's registrations; atexit.register and
// unregister; signal.signal, setitimer, alarm, pthread_sigmask,
// set_wakeup_fd, siginterrupt; threading.settrace, setprofile, stack_size;
// warnings.filterwarnings, simplefilter, resetwarnings; codecs.register,
// unregister, register_error; os.putenv, unsetenv, chdir, fchdir, umask,
// register_at_fork; locale.setlocale; socket.setdefaulttimeout;
// decimal.setcontext; random.seed and setstate on the module's shared
// generator (a random.Random of one's own may be seeded); faulthandler's and
// tracemalloc's switches; site.addsitedir; mimetypes.add_type and init;
// shutil's archive format registrations; webbrowser.register; csv's dialects
// and field_size_limit; sqlite3's adapters and converters; asyncio's event
// loop policy; logging.basicConfig, disable, setLoggerClass,
// setLogRecordFactory, addLevelName, captureWarnings, shutdown;
// weakref.finalize; typing.overload; enum.global_enum and Enum._convert_
// (they bind names in a module); ABCMeta.register and the register of a
// singledispatch function on an ABC or a function a module defines.
//
// # Helpers that resolve names from strings
//
// What the guard does with each helper that turns a string into an attribute, a
// module or code:
//
//   - getattr, hasattr, vars, dir: shims; the name passes the attribute gate.
//     vars(o) and o.__dict__ (eval-magic=__dict__) give a new dict holding only
//     the names the gate allows, each value as reading it would give it; dir(o)
//     lists the names the gate allows. functools.reduce(getattr, ...),
//     partial(getattr, ...) and map(getattr, ...) use the shim.
//   - str.format, str.format_map (bound, unbound, reached through type() or
//     __dict__): every field of the template passes the gate before formatting.
//   - string.Formatter (get_field, vformat, format, format_field): patched
//     process-wide once the string module is loaded, before evaluated code can
//     fetch anything from it, so the guard holds from the first call: each field
//     passes the gate, each spec is charged to eval-max-alloc. Its methods carry
//     the evaluation to the threads they are handed to.
//   - logging's '{' style (logging.Formatter(fmt, style='{'), StrFormatStyle):
//     while an evaluation runs, the template is checked field by field when the
//     style is built and when it formats; the methods of logging's formatters and
//     styles carry the evaluation to other threads. The '%' and '$' styles and a
//     LogRecord's %-formatting read a mapping: data.
//   - operator.attrgetter, operator.methodcaller: gated; each dotted part passes
//     the gate when the getter is built and is read through it when called.
//     operator.itemgetter and getitem are data, like a subscript (the value gate
//     sees their result). operator.setitem, delitem and the i* functions meet the
//     write check; add, mul, pow, lshift, mod and concat are charged like the
//     operators.
//   - object.__getattribute__, type.__getattribute__, super().__getattribute__,
//     any __getattr__ (all need eval-magic): gated; the name passes the gate.
//   - inspect: getattr_static and unwrap (__wrapped__) gated; signature,
//     Signature.from_callable and get_annotations refuse eval_str=True;
//     getmembers, getmembers_static, getclosurevars and the frame helpers
//     (currentframe, stack, trace, getouterframes, getinnerframes, getframeinfo,
//     getargvalues, getgeneratorlocals, getcoroutinelocals, getasyncgenlocals)
//     refused.
//   - pickle.loads, load, Unpickler (and pickle's and _pickle's other loaders):
//     refused, find_class resolves any module.name. pickle.dumps, copy.copy and
//     copy.deepcopy are allowed: they call __reduce_ex__, a fixed name (a class
//     defining it, by any route, passes the class gate). copyreg's
//     registrations (pickle, constructor, add_extension, remove_extension,
//     clear_extension_cache) are refused: they change the whole process, like a
//     write into copyreg.dispatch_table.
//   - dataclasses.asdict, astuple (recursively) and replace: gated, every field
//     name they read passes the gate; make_dataclass: field names and namespace
//     keys pass the gate, field types the annotation check, the class it makes
//     the class gate; fields: data.
//   - collections.namedtuple's _asdict, _make, _replace: index-based, data (their
//     private names need eval-attribute).
//   - string.Template, re's Match.expand and re.sub templates, %-formatting with a
//     mapping: they look names up in a mapping or a match: data.
//   - format(x, spec) and f-string specs resolve no name; their widths are charged
//     to eval-max-alloc.
//   - typing: a string type (typing.ForwardRef, also made by List['x']) is refused
//     while an evaluation runs, and a string annotation is refused: typing
//     evaluates them with the raw eval.
//   - pkgutil.resolve_name, help(), types.FunctionType and types.CodeType (also
//     reached as type(f)): refused; importlib.reload too (it runs a module's code
//     again in place).
//   - class patterns: a keyword sub-pattern (case C(attr=p)) may compare the
//     attribute, never bind it (CPython reads it around the runtime gate).
//
// Helpers are recognised by identity and by their module and qualified name, and
// the hooks are installed on each module object the first time the guard sees it,
// so a module imported anew (after a change to sys.modules) is treated the same.
// The process-wide hooks (string.Formatter, logging, typing) find the evaluation
// on the current thread, or from evaluated code on the stack: a function evaluated
// code defines stays checked on any thread.
//
// # What the guard cannot see from Python
//
// The interpreter creates a class in C (type.__new__), and no audit event or
// hook tells Python code about it: a class is judged when it reaches evaluated
// code, not when it is made. Between the two, the library that makes it may
// call some of its special methods itself (the functional Enum API calls the
// __new__ and __init__ it is given for each member; type.__new__ calls the
// __set_name__ of the values and the __init_subclass__ of the bases, which
// passed the gate when they reached the code). What runs then is what the code
// could call itself, at that moment, within its budgets; the class never
// reaches it. A class a library makes and hands over inside a container, then
// taken out without the value gate (a for loop, unpacking), is judged at its
// first attribute read or instance. A dunder whose value is a library function
// bearing that dunder's name passes as the library's implementation; one
// reached through a non-dunder alias could be installed under its own name.
// Which objects the code held is known from the value gate: a library object
// it took out of a library's container without the gate (a for loop,
// unpacking, a callback's parameter) counts as the factory's own.
// Likewise a class changed in place by a library function other than those
// above (a private helper, a third-party one) is judged again only when it
// next reaches the code, and the in-place writes of a third-party function
// into its arguments, or through a third-party view (a NumPy view of supplied
// data), are not seen. The methods of library objects that keep process state
// (logging's loggers and handlers, an event loop, sys.stdout) are not judged:
// the module-level functions that reconfigure them are. A container the code
// made and that is held elsewhere as well, reached without a helper (the
// values of its own dict through items(), unpacked), is treated as not its
// own unless it was marked when made: a write into it is refused (fail
// closed), and types.new_class's exec_body cannot write into the namespace it
// is given.
package evalguard
