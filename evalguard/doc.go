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
// unittest.mock and the guard itself, with their submodules.
//
// The value gate sees what a call returns, a subscript, an item a comprehension
// iterates and every attribute: a module meets the module gate; a helper that
// resolves names or source from strings is replaced by its gated form or refused.
// Annotations pass it too: a string type is refused.
//
// Writes: evaluated code never writes into an object the application supplied
// (the names, the caller's globals and locals as given, and what their lists,
// tuples, sets and dicts hold): not by a subscript store or delete, not by an
// augmented assignment that would change it in place (its type defines the
// in-place operator), whatever the operator and the target (`b = rows; b += [1]`
// like `rows[0] += 1` and `x['k'] += [1]`), not by a method that changes a
// built-in container in place (`b.extend(...)`, `list.append(rows, x)`,
// `d.pop(k)`, a deque's appendleft; bound, unbound or through
// operator.methodcaller), not by operator.setitem, delitem or the operator.i*
// functions. Its own copies (list(rows)) are its to change. An augmented
// assignment is charged to eval-max-alloc like its operator, whatever its target;
// an attribute target is refused statically, like every attribute store.
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
//     defining it needs eval-magic). copyreg's registrations (pickle,
//     constructor, add_extension, remove_extension, clear_extension_cache) are
//     refused: they change the whole process.
//   - dataclasses.asdict, astuple (recursively) and replace: gated, every field
//     name they read passes the gate; make_dataclass: field names and namespace
//     keys pass the gate, field types the annotation check; fields: data.
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
// Known limit: a class built by a metaclass call or a class factory
// (type(cls)(name, bases, ns) for a metaclass other than type,
// types.new_class, the functional Enum API) may define dunders without
// eval-magic.
package evalguard
