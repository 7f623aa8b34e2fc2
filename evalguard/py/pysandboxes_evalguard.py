"""The eval guard of pysandboxes: code given as a string is checked and run under
an eval profile (the eval-* rules of a .py-sandboxes file).

Each source is (1) parsed by CPython's own parser, (2) validated against the
profile's sub-language (every violation is collected into one report, each with
a paste-ready rule line), (3) rewritten so that attribute reads, calls,
subscripts, displays, allocating operators, augmented assignments, loops,
comprehensions, annotations, decorators and function definitions go through
runtime helpers that gate names and values and charge budgets, and (4) run in a
namespace built from the profile.

The runtime gates: every attribute name (whatever reads it: o.n, getattr, a
template field, a from-import, a helper resolving names from strings) passes the
attribute gate (_State.gate); every module reached by any route passes the
module gate (_State.module: eval-import, or supplied by the application; some
modules never); what calls, subscripts, comprehensions and decorators hand to
the code passes the value gate (_State.value), which also swaps the helpers that
resolve names or source from strings for gated forms or refuses them
(_HELPER_SPECS, _PATCHES), and refuses the process-wide setters; every class
that reaches the code passes the class gate (_State.cls_check): the special
methods it defines need what a class statement defining them needs; the code
writes only into what it made (_State.sight, decided from reference counts at
the helpers, nothing walked: _State.writable, _State.augop, _State.post).

Public API (standard library only, Python >= 3.11):

  check(src, profile, mode)            -> list of violation dicts (empty: accepted)
  run(src, names, profile, mode, filename='<eval>')
                                       -> the value (mode 'eval') or the names the
                                          code bound (mode 'exec')
  compile_profile(profile)             -> Profile (a profile dict, checked)
  describe(exc)                        -> (module, qualname, message, args) of a
                                          guard exception, else None
  Engine(profiles, report=None)        -> the guarded eval/exec/compile builtins and
                                          guarded_eval of a sandboxed interpreter
  Rejected, Denied, Interrupted        -> the exceptions

A profile is plain data: {'name': str, 'syntax'|'call'|'attribute'|'import'|'magic':
{'allow': [str], 'deny': [str]}, 'namespace': 'adaptive'|'closed'|'caller',
'timeout': float seconds, 'max_iterations', 'max_call_depth', 'max_depth',
'max_nodes', 'max_alloc', 'max_leaked_threads': int}; missing keys take the
defaults of the eval-* rules.

The guard imports only modules built into the interpreter (_ast, _string,
_thread, _operator, _functools, _weakref, marshal, sys, time), so loading it
costs about a millisecond and never reaches the file system. When it loads, it
checks the reference counts its write rule relies on (_calibrate).
"""

import sys
import marshal as _marshal
import _ast
import _string
import _thread
import _operator
import _functools
import _weakref
from time import monotonic as _monotonic

VERSION = 1

# The raw builtins, captured when the module is loaded (in a sandboxed
# interpreter, before the Python layer patches eval, exec and compile): the
# guard's own calls never go through its own patch.
_B = sys.modules['builtins']
_RAW = dict(_B.__dict__)
_compile = _RAW['compile']
_getframe = sys._getframe
_eval = _RAW['eval']
_exec = _RAW['exec']
_getattr = _RAW['getattr']
_hasattr = _RAW['hasattr']
_format = _RAW['format']
_isinstance = _RAW['isinstance']
_type = type
_len = len
_AST = _ast.AST
_ONLY_AST = _ast.PyCF_ONLY_AST
_CODE = type(compile('0', '<x>', 'eval'))
_BUILTIN_METHOD = type(''.join)
_STR_FORMAT = str.format
_STR_FORMAT_MAP = str.format_map
_MODULE = type(sys)
_MOD_DICT = _MODULE.__dict__['__dict__'].__get__
_METHOD_WRAPPER = type(().__str__)


class _Probe:
    def m(self):
        pass


_METHOD = type(_Probe().m)
_FUNCTION = type(_Probe.m)
del _Probe
# The values the value gate recognises by their names as well as by identity.
_NAMED_TYPES = frozenset((_FUNCTION, _BUILTIN_METHOD))
# The methods that change a container in place: the write rule applies to the
# object they are bound to, or to their first argument (reached unbound).
_MUTATORS = frozenset((
    'append', 'extend', 'insert', 'pop', 'remove', 'clear', 'sort', 'reverse', 'update', 'popitem', 'setdefault',
    'add', 'discard', 'intersection_update', 'difference_update', 'symmetric_difference_update', 'appendleft',
    'extendleft', 'popleft', 'rotate', 'move_to_end', 'subtract', '__setitem__', '__delitem__', '__iadd__',
    '__imul__', '__ior__', '__iand__', '__isub__', '__ixor__', '__init__', 'byteswap', 'frombytes', 'fromlist',
    'fromunicode', 'fromfile'))
# Methods that write into the buffer they are given (their first argument).
_BUFFER_WRITERS = frozenset(('readinto', 'readinto1', 'recv_into', 'recvfrom_into', 'pack_into'))


# Types augmented assignment never changes in place.
_IMMUTABLE = frozenset((int, float, complex, str, bytes, bool, tuple, frozenset, type(None), range))
# Values the value gate lets through at once: they hold no module, helper or
# code of their own.
_PLAIN = frozenset((int, float, complex, str, bytes, bytearray, bool, type(None), list, tuple, dict, set,
                    frozenset, range, slice, type(Ellipsis), type(NotImplemented)))
# The plain values writes cannot change.
_PLAIN_DATA = _PLAIN - frozenset((list, dict, set, bytearray))


# What the evaluation made (the write rule, see _State.sight): objects of the
# types writes can change (a subscript store or delete, an in-place operator, a
# container method), decided per type and kept (_writable(t) is a bool).
_TYPE_DICT = type.__dict__['__dict__'].__get__
_TYPE_MRO = type.__dict__['__mro__'].__get__
_TYPE_QUALNAME = type.__dict__['__qualname__'].__get__
_TYPE_FLAGS = type.__dict__['__flags__'].__get__
_WRITE_DUNDERS = ('__setitem__', '__delitem__', '__iadd__', '__isub__', '__imul__', '__imatmul__', '__itruediv__',
                  '__ifloordiv__', '__imod__', '__ipow__', '__ilshift__', '__irshift__', '__ior__', '__iand__',
                  '__ixor__')


_WT_BASE_YES = frozenset((list, dict, set, bytearray))
_WT_BASE_NO = frozenset((int, float, complex, str, bytes, bool, tuple, frozenset, type(None), range, slice,
                         type(Ellipsis), type(NotImplemented), type, _METHOD, _FUNCTION, _BUILTIN_METHOD,
                         _METHOD_WRAPPER, _MODULE))
_WT_YES = set(_WT_BASE_YES)   # types writes can change
_WT_NO = set(_WT_BASE_NO)     # types they cannot


def _wt(t):
    """True when writes can change objects of type t (not yet in _WT_YES or
    _WT_NO): it defines __setitem__, __delitem__ or an in-place operator."""
    w = False
    try:
        mro = _TYPE_MRO(t)
    except TypeError:
        mro = ()
    for B in mro:
        d = _TYPE_DICT(B)
        for n in _WRITE_DUNDERS:
            if n in d:
                w = True
                break
        if w:
            break
    if _len(_WT_YES) + _len(_WT_NO) >= 4096:
        _WT_YES.clear()
        _WT_YES.update(_WT_BASE_YES)
        _WT_NO.clear()
        _WT_NO.update(_WT_BASE_NO)
    (_WT_YES if w else _WT_NO).add(t)
    return w


def _writable(t):
    return t in _WT_YES or (t not in _WT_NO and _wt(t))


# The containers a mark looks into (their items, a dict's values).
_SCANNED = frozenset((list, tuple, set, frozenset, bytearray))
# Iterables that hold the items they yield.
_HOLDERS = frozenset((list, tuple, set, frozenset, dict))
_SCAN_MAX = 1 << 20       # objects one mark looks at, at most
_MADE_SWEEP = 4096        # marks before the first sweep
_MADE_WEIGHT = 1 << 22    # items looked at between sweeps, at most
_NOT_MADE = 'an object the evaluation did not make'
_refcount = sys.getrefcount
# The reference counts the write rule relies on, checked when the module loads
# (_calibrate): _RC_BASE for a value a helper got from its caller (the caller's
# local, the argument, getrefcount's), _RC_SCAN for an item while a mark looks
# into its container (the container, the loop variable, getrefcount's),
# _RC_SWEEP for a marked object nothing else holds. _RC_OK false: nothing is
# marked from its reference count (only displays and comprehensions are the
# evaluation's; fail closed).
_RC_BASE = 3
_RC_RET = 2
_RC_OWN = 2
_RC_SCAN = 3
_RC_SWEEP = 3
_RC_OK = True


def _viewed(v, t):
    """The object a view v (of type t) writes into, else None."""
    if t is memoryview:
        return v.obj
    c = sys.modules.get('collections')
    cm = _getattr(c, 'ChainMap', None) if c is not None else None
    if _isinstance(cm, type) and _isinstance(v, cm):
        maps = v.maps
        return maps[0] if maps else maps
    return None


def _any_writable(items):
    """True when some item of items is of a type writes can change (the types
    are gathered at C speed first)."""
    for t in set(map(_type, items)):
        if _writable(t):
            return True
    return False


# ---------------------------------------------------------------- exceptions

_sbm = sys.modules.get('pysandboxes')
if (_sbm is not None and _getattr(_sbm, 'is_in_sandbox', None) is not None
        and _isinstance(_getattr(_sbm, 'RuleEvalPermissionError', None), type)):
    # Inside a sandboxed interpreter: the guard's refusals belong to the
    # sandbox's exception family (pysandboxes.SandBoxError, sandbox_denials).
    SandBoxError = _sbm.SandBoxError
    _DeniedBase = _sbm.RuleEvalPermissionError
else:
    class SandBoxError(RuntimeError):
        """Base class of the eval guard's errors."""

    class _DeniedBase(PermissionError, SandBoxError):
        """A refusal of the eval guard."""
del _sbm


class Rejected(SandBoxError, SyntaxError):
    """The source violates the eval profile. .violations lists every violation
    (dicts: line, col, kind, name, message, fix, warning); the message is the
    rendered report. lineno, offset and text come from the first violation."""

    def __init__(self, violations, source_ref='<eval>', source=None, report=None):
        vs = [dict(v) for v in violations]
        if report is None:
            report = _render(vs, source_ref, source)
        _public(vs)
        SyntaxError.__init__(self, report)
        self.violations = vs
        self.source_ref = source_ref
        self.report = report
        self.filename = source_ref
        if vs and vs[0].get('line'):
            self.lineno = vs[0]['line']
            self.offset = vs[0].get('col') or None
            if source is not None:
                self.text = _line_of(source, vs[0]['line'])
        self.args = (vs, source_ref)

    def __str__(self):
        return self.report

    def __reduce__(self):
        return (_type(self), (self.violations, self.source_ref, None, self.report))


class Interrupted(BaseException):
    """A budget of the evaluation is exhausted: .budget names the rule key
    (eval-timeout, eval-max-iterations, eval-max-call-depth, eval-max-alloc),
    .limit its value. A BaseException: the evaluated code cannot swallow it
    (handlers and finally blocks re-raise it, and the evaluation raises it again
    when it ends)."""

    def __init__(self, budget, limit, message=None):
        if message is None:
            message = 'evaluation interrupted: %s=%s exhausted' % (budget, _show_limit(budget, limit))
        BaseException.__init__(self, budget, limit, message)
        self.budget = budget
        self.limit = limit
        self.message = message

    def __str__(self):
        return self.message


class Denied(_DeniedBase):
    """A refusal at run time: an attribute, a template field, a shim (setattr,
    globals(), ...), a write into an object the evaluation did not make, a
    special method a class defines, a process-wide setter, an import.
    .target is what was refused, .rule the rule key that would decide it, .kind
    the violation kind, .fix the rule line that allows it ('' when none can)."""

    def __init__(self, message, target='', rule='', kind='', fix=''):
        _DeniedBase.__init__(self, message)
        self.message = message
        self.target = target
        self.rule = rule
        self.kind = kind
        self.fix = fix

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (_type(self), (self.message, self.target, self.rule, self.kind, self.fix))


def describe(exc):
    """(module, qualname, message, args) of a guard exception, with args plain
    data (str, int, float, list, dict), for a host to rebuild it; None for any
    other exception. Rejected: args = [violations, source_ref]; Interrupted:
    [budget, limit, message]; Denied: [message, target, rule, kind, fix]."""
    t = _type(exc)
    if _isinstance(exc, Rejected):
        return (__name__, 'Rejected', exc.report, [[dict(v) for v in exc.violations], exc.source_ref])
    if _isinstance(exc, Interrupted):
        return (__name__, 'Interrupted', exc.message, [exc.budget, exc.limit, exc.message])
    if _isinstance(exc, Denied):
        return (__name__, 'Denied', exc.message, [exc.message, exc.target, exc.rule, exc.kind, exc.fix])
    del t
    return None


def _show_limit(budget, limit):
    if budget == 'eval-timeout':
        return '%gs' % limit
    return '%s' % (limit,)


# ---------------------------------------------------------------- vocabulary

_CORE = frozenset(('Module', 'Expression', 'Interactive', 'Constant', 'Name', 'Load', 'Store', 'Del',
                   'Tuple', 'List', 'Dict', 'Set', 'Expr', 'Pass'))
_SYNTAX_GROUPS = {
    'arith': ('BinOp', 'UnaryOp'),
    'compare': ('Compare', 'BoolOp'),
    'conditional': ('If', 'IfExp'),
    'loop': ('For', 'While', 'Break', 'Continue'),
    'comprehension': ('ListComp', 'SetComp', 'DictComp', 'GeneratorExp', 'comprehension'),
    'assign': ('Assign', 'AugAssign', 'AnnAssign', 'NamedExpr'),
    'func': ('FunctionDef', 'Return', 'arguments', 'arg', 'Lambda'),
    'async': ('AsyncFunctionDef', 'Await', 'AsyncFor', 'AsyncWith'),
    'class': ('ClassDef',),
    'exception': ('Try', 'TryStar', 'Raise', 'ExceptHandler'),
    'context': ('With', 'withitem'),
    'import': ('Import', 'ImportFrom', 'alias'),
    'subscript': ('Subscript', 'Slice', 'Starred'),
    'fstring': ('JoinedStr', 'FormattedValue'),
    'tstring': ('TemplateStr', 'Interpolation'),
    'yield': ('Yield', 'YieldFrom'),
}
_NODE_GROUP = {}
for _g, _ns in _SYNTAX_GROUPS.items():
    for _n in _ns:
        _NODE_GROUP[_n] = _g
del _g, _ns, _n

# Checked by their own rule rather than eval-syntax.
_FREE = frozenset(('Attribute', 'Call', 'keyword'))
# Operators, comparison operators, boolean operators, contexts: no capability.
_MARKERS = (_ast.operator, _ast.boolop, _ast.unaryop, _ast.cmpop, _ast.expr_context)

# Frame capture: always refused, whatever the rules say.
_FRAME = frozenset(('gi_frame', 'gi_code', 'gi_yieldfrom', 'cr_frame', 'cr_code', 'cr_await', 'ag_frame',
                    'ag_code', 'f_globals', 'f_locals', 'f_builtins', 'f_back', 'f_trace', 'tb_frame',
                    'tb_next'))
# The evaluation's own machinery (its globals, code objects, cells, builtins):
# always refused too, as an attribute and as an identifier.
_INTERNALS = frozenset(('__globals__', '__code__', '__closure__', '__builtins__'))
_RESERVED = '__sb_'

_ATTR_GROUP_TYPES = {
    'str-methods': (str,),
    'list-methods': (list,),
    'dict-methods': (dict,),
    'set-methods': (set,),
    'tuple-methods': (tuple,),
    'num-methods': (int, float),
    'bytes-methods': (bytes,),
    'date-methods': None,   # datetime's classes, imported when the group is used
}
_FORMAT_NAMES = ('format', 'format_map')
_RISKY_IMPORTS = frozenset(('os', 'sys', 'socket', 'builtins', 'shutil', 'subprocess', 'ctypes', 'importlib',
                            'posix', 'gc', 'inspect', 'pickle', 'marshal', 'code', 'codeop', 'runpy'))
_RUNS_SOURCE = 'it compiles and runs source text outside the eval guard'
# Builtins whose eval-call grant widens what evaluated code reaches: a fix line
# that grants one says so (the policy warns about the same grants when it loads).
_DANGEROUS_CALLS = {
    '__import__': 'dangerous grant: evaluated code imports modules named by strings (eval-import and the import '
                  'guard still decide which)',
    'open': 'dangerous grant: evaluated code opens files (the Python layer and the OS sandbox still decide which)',
    'eval': 'dangerous grant: evaluated code runs code built from strings (judged again, under the same profile)',
    'exec': 'dangerous grant: evaluated code runs code built from strings (judged again, under the same profile)',
    'compile': 'dangerous grant: evaluated code compiles code built from strings (judged again, under the same '
               'profile)',
    'getattr': 'evaluated code reads attributes named by strings (the attribute gate still decides each name)',
    'hasattr': 'evaluated code probes attributes named by strings (the attribute gate still decides each name)',
    'locals': 'dangerous grant: it hands the evaluation namespace (helpers included) to the code',
    'vars': 'vars(o) reads o.__dict__ (it also needs eval-magic=__dict__); vars() with no argument stays refused',
    'dir': 'dir(o) lists names, filtered by the attribute rules; dir() with no argument stays refused',
    'type': 'only the one-argument form works; the class factory stays refused',
}
# Builtins the guard refuses at run time whatever the profile: no rule helps.
_REFUSED_CALLS = {
    'globals': 'it would expose the evaluation\'s own globals',
    'breakpoint': 'it starts a debugger',
    'setattr': 'the sub-language never mutates attributes',
    'delattr': 'the sub-language never mutates attributes',
}
# Modules no eval- rule grants, by import or by any other route (a module's
# attribute, sys.modules, a function's result): each one hands evaluated code a
# way around the guard itself. A submodule shares its parent's verdict.
_NEVER_MODULES = {
    'builtins': 'it holds the raw getattr, eval, exec and __import__ (grant builtins one by one with eval-call)',
    'gc': 'it reaches every object of the process (get_objects, get_referrers)',
    'ctypes': 'it reads and writes memory and calls C functions by name',
    '_ctypes': 'it reads and writes memory and calls C functions by name',
    'code': _RUNS_SOURCE, 'codeop': _RUNS_SOURCE, 'timeit': _RUNS_SOURCE, 'pdb': _RUNS_SOURCE,
    'bdb': _RUNS_SOURCE, 'cProfile': _RUNS_SOURCE, 'profile': _RUNS_SOURCE, 'trace': _RUNS_SOURCE,
    'doctest': _RUNS_SOURCE, 'runpy': _RUNS_SOURCE, 'rlcompleter': _RUNS_SOURCE,
    'pydoc': 'it resolves dotted names from strings to any object (locate) and runs an interactive help',
    'shelve': 'it unpickles what it reads, which resolves module and attribute names to any object',
    'logging.config': 'it resolves dotted names from its configuration to any object and calls it',
    'unittest.mock': 'it resolves dotted names from strings to any object and replaces attributes',
    'pysandboxes_evalguard': 'it is the eval guard itself',
    'importlib.util': 'its loaders run a file\'s source outside the eval guard (spec_from_file_location, exec_module)',
    'importlib.machinery': 'its loaders run a file\'s source outside the eval guard',
    'importlib.abc': 'its loaders run a file\'s source outside the eval guard',
    'importlib._bootstrap': 'it is the import system itself (its loaders run source outside the eval guard)',
    'importlib._bootstrap_external': 'it is the import system itself (its loaders run source outside the eval guard)',
    'imp': 'its loaders run a file\'s source outside the eval guard',
    'zipimport': 'its loaders run a file\'s source outside the eval guard',
    'pkgutil': 'it imports modules named by strings (resolve_name, iter_modules with walk_packages)',
}


# Modules never granted themselves, whose submodules are judged on their own
# (importlib.resources and importlib.metadata read data; importlib's own
# import_module and reload import and run modules named by strings).
_NEVER_EXACT = {
    'importlib': 'it imports and reloads modules named by strings (import_module, reload, __import__)',
}


def _never(name):
    """Why the module name is never granted, else None."""
    r = _NEVER_EXACT.get(name)
    if r is not None:
        return r
    while True:
        r = _NEVER_MODULES.get(name)
        if r is not None:
            return r
        i = name.rfind('.')
        if i <= 0:
            return None
        name = name[:i]


# Classes whose class pattern matches the subject itself (no __match_args__).
_SELF_MATCH = frozenset(('bool', 'bytearray', 'bytes', 'dict', 'float', 'frozenset', 'int', 'list', 'set',
                         'str', 'tuple'))
_NAMESPACES = ('adaptive', 'closed', 'caller')
_DEFAULTS = {
    'namespace': 'adaptive', 'timeout': 5.0, 'max_iterations': 1000000, 'max_call_depth': 20,
    'max_depth': 20, 'max_nodes': 5000, 'max_alloc': 10000000, 'max_leaked_threads': 4,
}
_LIST_KEYS = ('syntax', 'call', 'attribute', 'import', 'magic')
_SET_ATTR = {'syntax': 'syntax', 'call': 'call', 'attribute': 'attribute', 'import': 'imp', 'magic': 'magic'}
# A source may hold at most this many characters per allowed node (see _parse).
SOURCE_CHARS_PER_NODE = 32


def _is_dunder(n):
    return _len(n) > 4 and n[:2] == '__' and n[-2:] == '__'


def _star(p, s):
    """Glob match where '*' is the only metacharacter and the match covers the
    whole name."""
    parts = p.split('*')
    if _len(parts) == 1:
        return p == s
    head = parts[0]
    tail = parts[-1]
    if _len(s) < _len(head) + _len(tail) or not s.startswith(head) or not s.endswith(tail):
        return False
    i = _len(head)
    end = _len(s) - _len(tail)
    for mid in parts[1:-1]:
        if not mid:
            continue
        j = s.find(mid, i, end)
        if j < 0:
            return False
        i = j + _len(mid)
    return True


# ---------------------------------------------------------------- profiles

class _NameSet:
    """One list key: exact names and '*' patterns, allow and deny; deny wins."""
    __slots__ = ('key', 'allow', 'deny', 'allow_pat', 'deny_pat')

    def __init__(self, key, allow, deny):
        self.key = key
        self.allow = set()
        self.deny = set()
        self.allow_pat = []
        self.deny_pat = []
        for tokens, exact, pats in ((allow, self.allow, self.allow_pat), (deny, self.deny, self.deny_pat)):
            for t in tokens:
                if _type(t) is not str or not t:
                    raise ValueError('eval profile: %s holds %r, not a name' % (key, t))
                if '*' in t:
                    if key == 'syntax':
                        raise ValueError("eval profile: syntax pattern %r: patterns are not allowed on eval-syntax" % t)
                    pats.append(t)
                elif key == 'syntax' and t in _SYNTAX_GROUPS:
                    exact.update(_SYNTAX_GROUPS[t])
                elif key == 'attribute' and '-' in t:
                    exact.update(_attr_group(t))
                else:
                    exact.add(t)
        if key == 'syntax':
            self.allow |= _CORE
        elif key == 'attribute':
            exact_allow = set(t for t in allow if '*' not in t and '-' not in t)
            for n in _FORMAT_NAMES:
                if n not in exact_allow:
                    self.deny.add(n)
        self.allow = frozenset(self.allow)
        self.deny = frozenset(self.deny)
        self.allow_pat = tuple(self.allow_pat)
        self.deny_pat = tuple(self.deny_pat)

    def allows(self, name):
        if name in self.deny:
            return False
        for p in self.deny_pat:
            if _star(p, name):
                return False
        if name in self.allow:
            return True
        for p in self.allow_pat:
            if _star(p, name):
                return True
        return False


def _attr_group(g):
    if g not in _ATTR_GROUP_TYPES:
        raise ValueError('eval profile: unknown attribute group %r (known: %s)' % (g, ', '.join(sorted(_ATTR_GROUP_TYPES))))
    types = _ATTR_GROUP_TYPES[g]
    if types is None:
        import datetime
        types = (datetime.date, datetime.time, datetime.datetime, datetime.timedelta)
    out = set()
    for t in types:
        out.update(n for n in dir(t) if not n.startswith('_'))
    if g == 'str-methods':
        out.difference_update(_FORMAT_NAMES)
    return out


class Profile:
    """A checked eval profile (see compile_profile)."""

    def __init__(self, d):
        if _type(d) is not dict:
            raise TypeError('eval profile: expected a dict, got %s' % _type(d).__name__)
        known = set(_LIST_KEYS) | set(_DEFAULTS) | {'name', 'v'}
        unknown = sorted(k for k in d if k not in known)
        if unknown:
            raise ValueError('eval profile: unknown key(s) %s' % ', '.join(map(repr, unknown)))
        v = d.get('v', VERSION)
        if v != VERSION:
            raise ValueError('eval profile: version %r, this guard reads version %d' % (v, VERSION))
        name = d.get('name', '')
        if _type(name) is not str:
            raise ValueError('eval profile: name must be a str')
        self.name = name
        self.source_ref = '<eval:%s>' % (name or 'default')
        for k in _LIST_KEYS:
            spec = d.get(k) or {}
            if _type(spec) is not dict or set(spec) - {'allow', 'deny'}:
                raise ValueError("eval profile: %s must be {'allow': [...], 'deny': [...]}" % k)
            allow = spec.get('allow') or []
            deny = spec.get('deny') or []
            if _type(allow) not in (list, tuple) or _type(deny) not in (list, tuple):
                raise ValueError('eval profile: %s allow/deny must be lists' % k)
            setattr(self, _SET_ATTR[k], _NameSet(k, allow, deny))
        ns = d.get('namespace', _DEFAULTS['namespace'])
        if ns not in _NAMESPACES:
            raise ValueError('eval profile: unknown namespace mode %r, expected one of %r' % (ns, list(_NAMESPACES)))
        self.namespace = ns
        t = d.get('timeout', _DEFAULTS['timeout'])
        if _type(t) not in (int, float) or not (t > 0) or t != t:
            raise ValueError('eval profile: timeout must be a positive number of seconds')
        self.timeout = float(t)
        for k in ('max_iterations', 'max_call_depth', 'max_depth', 'max_nodes', 'max_alloc', 'max_leaked_threads'):
            x = d.get(k, _DEFAULTS[k])
            if _type(x) is not int or x < 0:
                raise ValueError('eval profile: %s must be a non-negative int' % k)
            setattr(self, k, x)
        self._attr = {}
        self._syntax = {}
        # Builtins of the namespace: the callables eval-call allows (dunders other
        # than __import__ and __build_class__ never enter it).
        self.builtin_names = tuple(sorted(
            n for n in _RAW if self.call.allows(n) and not n.startswith(_RESERVED)
            and (not _is_dunder(n) or n in ('__import__', '__build_class__'))))
        self.classes = self.syntax_ok('ClassDef')
        self.import_syntax = self.syntax_ok('Import') or self.syntax_ok('ImportFrom')

    def rule(self, key, value):
        """The rule line setting key to value in this profile: eval-call=len, or
        eval-call:calc=len for the profile named calc."""
        return '%s%s=%s' % (key, ':' + self.name if self.name else '', value)

    def syntax_ok(self, node):
        r = self._syntax.get(node)
        if r is None:
            r = self._syntax[node] = self.syntax.allows(node)
        return r

    def attr_verdict(self, name):
        """None when name may be read as an attribute, else (kind, rule, fix,
        message at run time, message of the static check)."""
        r = self._attr.get(name, 0)
        if r == 0:
            r = self._attr_verdict(name)
            if _len(self._attr) < 4096:
                self._attr[name] = r
        return r

    def _attr_verdict(self, name):
        v = _name_verdict(self, name)
        if v is not None:
            return v
        if _is_dunder(name):
            if self.magic.allows(name):
                return None
            fix = self.rule('eval-magic', name)
            return ('magic', 'eval-magic', fix,
                    "'%s' is denied by the eval guard: a dunder name opens the type hierarchy. "
                    "Add `%s` to allow it." % (name, fix),
                    "dunder attribute '%s' is not allowed by eval-magic (it opens the whole type hierarchy)" % name)
        if self.attribute.allows(name):
            return None
        fix = self.rule('eval-attribute', name)
        if name in _FORMAT_NAMES:
            return ('attribute', 'eval-attribute', fix,
                    "'%s' is denied by the eval guard: str.%s is granted only by its exact name (its templates "
                    "are then checked field by field at run time; an f-string is the safer choice). "
                    "Add `%s` to allow it." % (name, name, fix),
                    "attribute '%s' is not allowed by eval-attribute: str.%s is granted only by its exact name "
                    "(its templates are then checked field by field at run time; an f-string is the safer choice)"
                    % (name, name))
        return ('attribute', 'eval-attribute', fix,
                "'%s' is denied by the eval guard. Add `%s` to allow it." % (name, fix),
                "attribute '%s' is not allowed by eval-attribute" % name)


def _name_verdict(P, name):
    if name.startswith(_RESERVED):
        m = ("'%s' is denied by the eval guard: the prefix __sb_ is reserved for the guard's helpers "
             "(no rule grants it): rename it." % name)
        return ('reserved', '', '', m, m)
    if name in _FRAME:
        m = "'%s' is denied by the eval guard: frame capture is always refused and no eval- rule grants it." % name
        return ('frame', 'eval-attribute', '', m, m)
    if name in _INTERNALS:
        m = ("'%s' is denied by the eval guard: it reaches the evaluation's own globals, code, cells or "
             "builtins, which is always refused (no eval- rule grants it)." % name)
        return ('frame', 'eval-magic', '', m, m)
    return None


_PROFILES = {}


def compile_profile(profile):
    """A Profile from a profile dict (a Profile is returned as is). Checked
    profiles are kept, keyed by their content (at most 64)."""
    if _isinstance(profile, Profile):
        return profile
    if _type(profile) is not dict:
        raise TypeError('eval profile: expected a dict, got %s' % _type(profile).__name__)
    try:
        key = _marshal.dumps(profile)
    except ValueError:
        raise ValueError('eval profile: only str, int, float, bool, list and dict values are accepted') from None
    p = _PROFILES.get(key)
    if p is None:
        p = Profile(profile)
        if _len(_PROFILES) >= 64:
            _PROFILES.clear()
        _PROFILES[key] = p
    return p


# ---------------------------------------------------------------- report

def _line_of(source, line):
    if source is None or line < 1:
        return None
    lines = source.split('\n', line)
    if line > _len(lines):
        return None
    return lines[line - 1].rstrip('\r\n')


def _render(vs, source_ref, source):
    n = _len(vs)
    out = ['%d rule%s violated in %s' % (n, '' if n == 1 else 's', source_ref)]
    for v in vs:
        if v.get('line'):
            out.append('  line %d, col %d: %s' % (v['line'], v.get('col') or 0, v['message']))
            text = _line_of(source, v['line'])
            if text is not None and text.strip():
                stripped = text.strip()
                lead = _len(text) - _len(text.lstrip())
                start = max(0, (v.get('col') or 1) - 1 - lead)
                width = max(1, min(_len(stripped) - start, v.get('width') or 1))
                out.append('    ' + stripped)
                out.append('    ' + ' ' * start + '^' * width)
        else:
            out.append('  %s' % v['message'])
        if v.get('fix'):
            out.append('    add: ' + v['fix'])
        else:
            out.append('    no eval- rule allows it')
        if v.get('warning'):
            out.append('    \u26a0 ' + v['warning'])
    return '\n'.join(out)


def _viol(line, col, kind, name, message, fix='', warning='', width=0):
    d = {'line': line, 'col': col, 'kind': kind, 'name': name, 'message': message, 'fix': fix}
    if warning:
        d['warning'] = warning
    if width:
        d['width'] = width
    return d


def _public(vs):
    for v in vs:
        v.pop('width', None)
    return vs


# ---------------------------------------------------------------- parse + check

class _Source:
    """Positions: CPython gives UTF-8 byte columns; violations give 1-based
    character columns."""
    __slots__ = ('text', 'lines')

    def __init__(self, text):
        self.text = text
        self.lines = None

    def col(self, line, bcol):
        if self.text is None or line < 1:
            return bcol + 1
        if self.lines is None:
            self.lines = self.text.split('\n')
        if line > _len(self.lines):
            return bcol + 1
        s = self.lines[line - 1]
        if s.isascii():
            return bcol + 1
        return _len(s.encode('utf-8', 'surrogatepass')[:bcol].decode('utf-8', 'replace')) + 1


def _pos(src, node):
    line = _getattr(node, 'lineno', None)
    if line is None:
        return 0, 0, 0
    col = src.col(line, node.col_offset)
    width = 0
    el = _getattr(node, 'end_lineno', None)
    if el == line and node.end_col_offset is not None:
        width = src.col(line, node.end_col_offset) - col
    return line, col, width


def _parse(source, P, mode, filename):
    """(tree, violations): the tree when the source parses, with the
    violations of the profile."""
    if _type(source) is not str:
        if _isinstance(source, str):
            source = str.__str__(source)
        else:
            raise TypeError('eval guard: the source must be a str, got %s' % _type(source).__name__)
    n = _len(source)
    # The parser builds the whole tree before it can be measured, and its memory
    # grows with the source: a source may hold at most SOURCE_CHARS_PER_NODE
    # characters per node allowed by eval-max-nodes, and at most eval-max-alloc.
    lim = SOURCE_CHARS_PER_NODE * P.max_nodes
    if n > lim:
        need = -(-n // SOURCE_CHARS_PER_NODE)
        return None, [_viol(0, 0, 'size', 'eval-max-nodes',
                            'the source holds %d characters, more than %d (%d per node allowed by eval-max-nodes=%d)'
                            % (n, lim, SOURCE_CHARS_PER_NODE, P.max_nodes), P.rule('eval-max-nodes', need))]
    if n > P.max_alloc:
        return None, [_viol(0, 0, 'size', 'eval-max-alloc',
                            'the source holds %d characters, more than eval-max-alloc=%d' % (n, P.max_alloc),
                            P.rule('eval-max-alloc', n))]
    i = source.find('\x00')
    if i >= 0:
        line = source.count('\n', 0, i) + 1
        col = i - (source.rfind('\n', 0, i) + 1) + 1
        return None, [_viol(line, col, 'source', 'NUL', 'the source holds a NUL character')]
    try:
        source.encode('utf-8')
    except UnicodeEncodeError as e:
        i = e.start
        line = source.count('\n', 0, i) + 1
        col = i - (source.rfind('\n', 0, i) + 1) + 1
        return None, [_viol(line, col, 'source', 'U+%04X' % ord(source[i]),
                            'the source holds a lone surrogate (U+%04X): it is not valid text' % ord(source[i]))]
    try:
        tree = _compile(source, filename, mode, _ONLY_AST, True)
    except SyntaxError as e:
        msg = e.msg or 'invalid syntax'
        if 'too many nested' in msg or 'too complex' in msg or 'too many statically nested' in msg:
            return None, [_deep_violation(msg)]
        line = e.lineno or 0
        col = max(e.offset or 0, 1) if line else 0
        return None, [_viol(line, col, 'parse', '', 'invalid Python (%s): %s' % (mode, msg))]
    except (RecursionError, MemoryError) as e:
        return None, [_deep_violation(str(e) or _type(e).__name__)]
    except ValueError as e:
        return None, [_viol(0, 0, 'source', '', 'the source cannot be parsed: %s' % e)]
    return tree, _validate(tree, P, _Source(source))


def _deep_violation(why):
    return _viol(0, 0, 'depth', 'eval-max-depth',
                 'the source nests deeper than CPython can parse (%s); no eval-max-depth makes it acceptable' % why)


def _validate(tree, P, src):
    """Every violation of the profile in tree, sorted by position; a single
    violation when the tree nests deeper than eval-max-depth. Iterative: a deep
    tree cannot exhaust the stack."""
    ck = _Checker(P, src)
    maxd = 0
    count = 0
    stack = [(tree, 1, None)]
    AST = _AST
    limit = P.max_depth
    visit = ck.visit
    while stack:
        node, d, parent = stack.pop()
        count += 1
        if d > maxd:
            maxd = d
        loc = node if _getattr(node, 'lineno', None) is not None else parent
        for f in node._fields:
            v = _getattr(node, f, None)
            if _type(v) is list:
                for x in v:
                    if _isinstance(x, AST):
                        stack.append((x, d + 1, loc))
            elif _isinstance(v, AST):
                stack.append((v, d + 1, loc))
        if maxd <= limit:
            visit(node, loc)
    if maxd > limit:
        return [_viol(0, 0, 'depth', 'eval-max-depth', 'the source nests %d levels deep, more than eval-max-depth=%d'
                      % (maxd, limit), P.rule('eval-max-depth', maxd))]
    out = ck.out
    if count > P.max_nodes:
        out.append(_viol(0, 0, 'nodes', 'eval-max-nodes', 'the source holds %d nodes, more than eval-max-nodes=%d'
                         % (count, P.max_nodes), P.rule('eval-max-nodes', count)))
    out.sort(key=lambda v: (v['line'] or 1 << 30, v['col']))
    return out


class _Checker:
    """The per-node checks of _validate."""
    __slots__ = ('P', 'src', 'out', 'loc', 'callees')

    def __init__(self, P, src):
        self.P = P
        self.src = src
        self.out = []
        self.loc = None
        self.callees = set()   # ids of Name nodes called (a dunder callee is judged by eval-call)

    def add(self, kind, target, message, fix='', warning='', at=None):
        at = at if at is not None else self.loc
        line, col, width = _pos(self.src, at) if at is not None else (0, 0, 0)
        self.out.append(_viol(line, col, kind, target, message, fix, warning, width))

    def ident(self, n, callee=False, at=None):
        P = self.P
        v = _name_verdict(P, n)
        if v is None and not callee and _is_dunder(n) and not P.magic.allows(n) and not P.call.allows(n):
            m = "dunder name '%s' is not allowed by eval-magic (it opens the whole type hierarchy)" % n
            v = ('magic', 'eval-magic', P.rule('eval-magic', n), m, m)
        if v is not None:
            self.add(v[0], n, v[4], v[2], at=at)

    def attr(self, n, kind=None, at=None, prefix=''):
        v = self.P.attr_verdict(n)
        if v is not None:
            self.add(kind or v[0], n, prefix + v[4], v[2], at=at)

    def visit(self, node, loc):
        self.loc = loc
        P = self.P
        cls = _type(node)
        name = cls.__name__
        if not (_isinstance(node, _MARKERS) or name in _FREE) and not P.syntax_ok(name):
            g = _NODE_GROUP.get(name)
            if g is not None and g != name:
                fix = '%s (or, narrower: %s)' % (P.rule('eval-syntax', g), P.rule('eval-syntax', name))
            else:
                fix = P.rule('eval-syntax', name)
            self.add('syntax', name, "'%s' is not allowed by eval-syntax" % name, fix)
        if cls is _ast.Name:
            self.ident(node.id, id(node) in self.callees)
        elif cls is _ast.Attribute:
            if _type(node.ctx) is not _ast.Load:
                self.add('attribute', node.attr, "attribute '%s' is assigned or deleted: the sub-language never "
                         "mutates attributes" % node.attr)
            else:
                self.attr(node.attr)
        elif cls is _ast.Call:
            f = node.func
            if _type(f) is _ast.Name:
                self.callees.add(id(f))
                if _name_verdict(P, f.id) is None and not P.call.allows(f.id):
                    if f.id in _REFUSED_CALLS:
                        self.add('call', f.id, "calling '%s' is always refused by the eval guard: %s"
                                 % (f.id, _REFUSED_CALLS[f.id]))
                    else:
                        self.add('call', f.id, "calling '%s' is not allowed by eval-call" % f.id,
                                 P.rule('eval-call', f.id), _DANGEROUS_CALLS.get(f.id, ''))
            elif (_type(f) is _ast.Attribute and f.attr in _FORMAT_NAMES and _type(f.value) is _ast.Constant
                    and _type(f.value.value) is str):
                for fname in _template_attrs(f.value.value):
                    self.attr(fname, 'format', f.value, "template field reads '%s': " % fname)
        elif cls in (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef):
            self.ident(node.name)
        elif cls is _ast.arg:
            self.ident(node.arg)
        elif cls is _ast.keyword:
            if node.arg is not None:
                self.ident(node.arg)
        elif cls is _ast.alias:
            if node.asname is not None:
                self.ident(node.asname)
        elif cls is _ast.Import:
            for a in node.names:
                for part in a.name.split('.'):
                    self.ident(part, at=a)
                self.module(a.name, a)
                if a.asname is None and '.' in a.name:
                    # import a.b binds a: the root module must be granted too.
                    root = a.name.split('.')[0]
                    self.module(root, a, " (`import %s` binds the name '%s'; `import %s as %s` binds only the "
                                "submodule)" % (a.name, root, a.name, a.name.rsplit('.', 1)[1]))
        elif cls is _ast.ImportFrom:
            if node.level:
                self.add('import', '.' * node.level + (node.module or ''), 'relative imports are refused: name the '
                         'module in full')
            elif node.module is not None:
                self.module(node.module)
            for a in node.names:
                if a.name == '*':
                    self.add('import', '*', 'a star import binds names the source does not show: import them by '
                             'name', at=a)
                else:
                    # A name taken from a module is an attribute read of that module.
                    self.attr(a.name, at=a, prefix="'from %s import %s' reads an attribute of the module: "
                              % (node.module or '.', a.name))
        elif cls is _ast.ExceptHandler:
            if node.name is not None:
                self.ident(node.name)
        elif cls is _ast.Global or cls is _ast.Nonlocal:
            for n in node.names:
                self.ident(n)
        elif cls is _ast.MatchAs or cls is _ast.MatchStar:
            if node.name is not None:
                self.ident(node.name)
        elif cls is _ast.MatchMapping:
            if node.rest is not None:
                self.ident(node.rest)
        elif cls is _ast.MatchClass:
            for a, sub in zip(node.kwd_attrs, node.kwd_patterns):
                self.attr(a)
                cap = _capture(sub)
                if cap is not None:
                    self.add('syntax', 'MatchClass', "the keyword sub-pattern %s=... binds '%s' to the attribute as "
                             "CPython reads it, around the runtime gate (a module or a helper would come through "
                             "unchecked): compare the attribute with a value in the pattern, or read it with "
                             "getattr() in the case body" % (a, cap))
            if node.patterns and not (_type(node.cls) is _ast.Name and node.cls.id in _SELF_MATCH):
                self.add('syntax', 'MatchClass', "a class pattern with positional sub-patterns reads the attributes "
                         "named by the class's __match_args__, which the guard cannot check: use keyword "
                         "sub-patterns")
        elif name in ('TypeVar', 'ParamSpec', 'TypeVarTuple'):
            self.ident(node.name)

    def module(self, mod, at=None, why=''):
        never = _never(mod)
        if never is not None:
            self.add('import', mod, "importing '%s' is never allowed in evaluated code: %s" % (mod, never), at=at)
            return
        if self.P.imp.allows(mod):
            return
        root = mod.split('.')[0]
        warning = ''
        if root in _RISKY_IMPORTS:
            warning = ("'%s' hands evaluated code a capability the import guard treats as sensitive: prefer "
                       "passing the few functions needed through the namespace" % root)
        self.add('import', mod, "importing '%s' is not allowed by eval-import%s" % (mod, why),
                 self.P.rule('eval-import', mod), warning, at=at)


def _capture(pattern):
    """The first name a match pattern binds, else None."""
    stack = [pattern]
    while stack:
        p = stack.pop()
        t = _type(p)
        if (t is _ast.MatchAs or t is _ast.MatchStar) and p.name is not None:
            return p.name
        if t is _ast.MatchMapping and p.rest is not None:
            return p.rest
        for f in p._fields:
            v = _getattr(p, f, None)
            if _type(v) is list:
                stack.extend(x for x in v if _isinstance(x, _ast.pattern))
            elif _isinstance(v, _ast.pattern):
                stack.append(v)
    return None


def _template_attrs(tpl, depth=2):
    """The attribute names the fields of a str.format template read (nested
    spec fields included)."""
    out = []
    try:
        for literal, field, spec, conv in _string.formatter_parser(tpl):
            if field is not None:
                first, rest = _string.formatter_field_name_split(field)
                for is_attr, n in rest:
                    if is_attr:
                        out.append(n)
            if spec and depth > 1 and '{' in spec:
                out.extend(_template_attrs(spec, depth - 1))
    except (ValueError, TypeError):
        pass  # a malformed template fails when it is used
    return out


# ---------------------------------------------------------------- rewrite

_BINOPS = {_ast.Add: '+', _ast.Mult: '*', _ast.Pow: '**', _ast.LShift: '<<', _ast.Mod: '%'}
_OPS = {
    '+': _operator.add, '*': _operator.mul, '**': _operator.pow, '<<': _operator.lshift, '%': _operator.mod,
}
# Augmented assignment, every operator: the in-place function and the dunder
# whose presence on the target's type makes it a mutation in place.
_AUG_OPS = {
    '+=': (_operator.iadd, '__iadd__'), '-=': (_operator.isub, '__isub__'), '*=': (_operator.imul, '__imul__'),
    '@=': (_operator.imatmul, '__imatmul__'), '/=': (_operator.itruediv, '__itruediv__'),
    '//=': (_operator.ifloordiv, '__ifloordiv__'), '%=': (_operator.imod, '__imod__'),
    '**=': (_operator.ipow, '__ipow__'), '<<=': (_operator.ilshift, '__ilshift__'),
    '>>=': (_operator.irshift, '__irshift__'), '|=': (_operator.ior, '__ior__'),
    '^=': (_operator.ixor, '__ixor__'), '&=': (_operator.iand, '__iand__'),
}
_AUG_SYMBOLS = {
    _ast.Add: '+=', _ast.Sub: '-=', _ast.Mult: '*=', _ast.MatMult: '@=', _ast.Div: '/=', _ast.FloorDiv: '//=',
    _ast.Mod: '%=', _ast.Pow: '**=', _ast.LShift: '<<=', _ast.RShift: '>>=', _ast.BitOr: '|=', _ast.BitXor: '^=',
    _ast.BitAnd: '&=',
}
_LOC = ('lineno', 'col_offset', 'end_lineno', 'end_col_offset')


def _at(new, old):
    for a in _LOC:
        setattr(new, a, _getattr(old, a, None) if a.startswith('end') else _getattr(old, a, 1 if a == 'lineno' else 0))
    return new


def _nm(i, old, ctx=None):
    return _at(_ast.Name(id=i, ctx=ctx or _ast.Load()), old)


def _call(fn, args, old):
    return _at(_ast.Call(func=_nm(fn, old), args=args, keywords=[]), old)


def _const(v, old):
    return _at(_ast.Constant(value=v), old)


def _stmt(fn, old, args=()):
    return _at(_ast.Expr(value=_call(fn, list(args), old)), old)


class _RW:
    __slots__ = ('writable',)

    def __init__(self):
        self.writable = False


def _key(k, old):
    """The subscript key k as an expression: a slice (alone or in a tuple)
    becomes a slice object."""
    if _type(k) is _ast.Slice:
        return _call('__sb_slice__', [k.lower or _const(None, old), k.upper or _const(None, old),
                                      k.step or _const(None, old)], old)
    if _type(k) is _ast.Tuple and any(_type(e) is _ast.Slice for e in k.elts):
        return _at(_ast.Tuple(elts=[_key(e, old) for e in k.elts], ctx=_ast.Load()), k)
    return k


def _rewrite(node, cx):
    """Rewrite node's subtree (children first); returns the replacement (a list
    for a statement that becomes several)."""
    cls = _type(node)
    if cls is _ast.MatchClass:
        _children(node, cx, ('patterns', 'kwd_patterns'))
    elif cls is _ast.MatchMapping:
        _children(node, cx, ('patterns',))   # keys: constants or dotted names
    elif cls is _ast.MatchValue:
        pass  # a constant or a dotted name (checked statically)
    else:
        _children(node, cx, node._fields)

    if cls is _ast.Attribute:
        return _call('__sb_getattr__', [node.value, _const(node.attr, node)], node)
    if cls is _ast.Call:
        # What a call returns passes the value gate (a module, a helper).
        return _call('__sb_ret__', [node], node)
    if cls is _ast.BinOp:
        op = _BINOPS.get(_type(node.op))
        if op is not None:
            return _call('__sb_binop__', [_const(op, node), node.left, node.right], node)
        return node
    if cls is _ast.Subscript:
        if _type(node.ctx) is not _ast.Load:
            node.value = _call('__sb_writable__', [node.value], node)
            cx.writable = True
            return node
        # c[k] is read by the helper, which knows the container: what it holds
        # is the evaluation's when the container is (see _State.sight).
        return _call('__sb_item__', [node.value, _key(node.slice, node)], node)
    if (cls is _ast.List and _type(node.ctx) is _ast.Load) or cls in (_ast.Dict, _ast.Set, _ast.ListComp,
                                                                        _ast.SetComp, _ast.DictComp):
        # A container the code builds is its own to change (see _State.made).
        return _call('__sb_own__', [node], node)
    if cls in (_ast.ClassDef, _ast.FunctionDef, _ast.AsyncFunctionDef) and node.decorator_list:
        # What a decorator returns passes the value gate (a class it changed
        # meets the class gate again).
        node.decorator_list = [_call('__sb_deco__', [d], d) for d in node.decorator_list]
    if cls is _ast.arg or cls is _ast.AnnAssign:
        if node.annotation is not None:
            node.annotation = _call('__sb_annot__', [node.annotation], node.annotation)
        return node
    if cls is _ast.FormattedValue:
        if node.format_spec is not None:
            conv = _const(node.conversion, node)
            node.value = _call('__sb_format__', [node.value, conv, node.format_spec], node)
            node.conversion = -1
            node.format_spec = None
        return node
    if cls in (_ast.For, _ast.AsyncFor, _ast.While):
        node.body.insert(0, _stmt('__sb_tick__', node))
        return node
    if cls is _ast.comprehension:
        fn = '__sb_aiter__' if node.is_async else '__sb_iter__'
        node.iter = _call(fn, [node.iter], node.iter)
        return node
    if cls in (_ast.FunctionDef, _ast.AsyncFunctionDef):
        if node.returns is not None:
            node.returns = _call('__sb_annot__', [node.returns], node.returns)
        body = node.body
        doc = []
        if body and _type(body[0]) is _ast.Expr and _type(body[0].value) is _ast.Constant and \
                _type(body[0].value.value) is str:
            doc = [body.pop(0)]
        first = body[0] if body else node
        t = _at(_ast.Try(body=body or [_at(_ast.Pass(), node)], handlers=[], orelse=[],
                         finalbody=[_stmt('__sb_leave__', first)]), first)
        node.body = doc + [_stmt('__sb_enter__', first), t]
        return node
    if cls is _ast.Lambda:
        return _call('__sb_func__', [node], node)
    if cls is _ast.ExceptHandler:
        node.body.insert(0, _stmt('__sb_check__', node))
        return node
    if cls is _ast.Try or cls is _getattr(_ast, 'TryStar', None):
        if node.finalbody:
            node.finalbody.insert(0, _stmt('__sb_check__', node.finalbody[0]))
        return node
    if cls in (_ast.With, _ast.AsyncWith):
        return [node, _stmt('__sb_check__', node)]
    if cls is _ast.AugAssign:
        # Every operator, every target: t op= v becomes t = __sb_augop__(op, t, v),
        # which refuses a change in place of an object the evaluation did not make
        # and charges the allocating operators (an attribute target is refused
        # statically: the sub-language never mutates attributes).
        op = _AUG_SYMBOLS[_type(node.op)]
        cx.writable = True
        t = node.target
        if _type(t) is _ast.Name:
            return _at(_ast.Assign(targets=[_nm(t.id, t, _ast.Store())],
                                   value=_call('__sb_augop__', [_const(op, node), _nm(t.id, t), node.value], node)),
                       node)
        if _type(t) is _ast.Subscript:
            key = t.slice
            if _type(key) is _ast.Slice:
                key = _call('__sb_slice__', [key.lower or _const(None, t), key.upper or _const(None, t),
                                             key.step or _const(None, t)], t)
            bind_c = _at(_ast.Assign(targets=[_nm('__sb_container__', t, _ast.Store())], value=t.value), node)
            bind_k = _at(_ast.Assign(targets=[_nm('__sb_key__', t, _ast.Store())], value=key), node)
            read = _call('__sb_item__', [_nm('__sb_container__', t), _nm('__sb_key__', t)], t)
            store = _at(_ast.Subscript(value=_nm('__sb_container__', t), slice=_nm('__sb_key__', t),
                                       ctx=_ast.Store()), t)
            assign = _at(_ast.Assign(targets=[store],
                                     value=_call('__sb_augop__', [_const(op, node), read, node.value], node)), node)
            return [bind_c, bind_k, assign]
        return node  # an attribute target is refused statically
    return node


def _children(node, cx, fields):
    AST = _AST
    for f in fields:
        v = _getattr(node, f, None)
        if _type(v) is list:
            new = []
            for x in v:
                if _isinstance(x, AST):
                    r = _rewrite(x, cx)
                    if _type(r) is list:
                        new.extend(r)
                    else:
                        new.append(r)
                else:
                    new.append(x)
            v[:] = new
        elif _isinstance(v, AST):
            setattr(node, f, _rewrite(v, cx))


def _copy(node):
    """A deep copy of an AST (for a tree handed in by the caller)."""
    AST = _AST

    def cp(n):
        c = _type(n).__new__(_type(n))
        for f in n._fields:
            v = _getattr(n, f, None)
            if _type(v) is list:
                setattr(c, f, [cp(x) if _isinstance(x, AST) else x for x in v])
            elif _isinstance(v, AST):
                setattr(c, f, cp(v))
            else:
                setattr(c, f, v)
        for a in n._attributes:
            if _hasattr(n, a):
                setattr(c, a, _getattr(n, a))
        return c
    return cp(node)


def _prepare(P, source, mode, filename, tree=None):
    """Parse (unless tree is given), check, rewrite and compile. Returns (code,
    uses_writable); raises Rejected."""
    if tree is None:
        tree, vs = _parse(source, P, mode, filename)
    else:
        vs = _validate(tree, P, _Source(None))
    if vs:
        raise Rejected(vs, P.source_ref, source)
    cx = _RW()
    try:
        tree = _rewrite(tree, cx)
        code = _compile(tree, filename, mode, 0, True)
    except SyntaxError as e:
        line = e.lineno or 0
        v = _viol(line, e.offset or 0, 'parse', '', 'invalid Python (%s): %s' % (mode, e.msg))
        raise Rejected([v], P.source_ref, source) from None
    except (RecursionError, MemoryError) as e:
        raise Rejected([_deep_violation(str(e) or _type(e).__name__)], P.source_ref, source) from None
    _note_code(code)
    return code, cx.writable


def _note_code(code):
    """Remember code and the code objects it holds (its functions, lambdas,
    classes) as evaluated code's, as long as they live (see _eval_function)."""
    stack = [code]
    while stack:
        c = stack.pop()
        i = id(c)
        r = _EVAL_CODES.get(i)
        if r is not None and r() is c:
            continue
        _EVAL_CODES[i] = _weakref.ref(c, lambda _, i=i: _EVAL_CODES.pop(i, None))
        stack.extend(x for x in c.co_consts if _type(x) is _CODE)


def check(src, profile, mode='eval'):
    """Every violation of profile in src (mode 'eval' or 'exec'), as a list of
    dicts {line, col, kind, name, message, fix[, warning]}: line and col are
    1-based (0 for the whole source), fix the rule line that allows it ('' when
    no rule can). An empty list means run would accept the source: it parsed,
    passed the profile, was rewritten and compiled."""
    if mode not in ('eval', 'exec'):
        raise ValueError("eval guard: mode must be 'eval' or 'exec', not %r" % (mode,))
    P = compile_profile(profile)
    tree, vs = _parse(src, P, mode, P.source_ref)
    if vs or tree is None:
        return _public(vs)
    try:
        _prepare(P, src, mode, P.source_ref, tree)
    except Rejected as e:
        return e.violations
    return []


# ---------------------------------------------------------------- runtime

_TLS = _thread._local()


def _current():
    s = _getattr(_TLS, 'stack', None)
    return s[-1] if s else None


def _state_here():
    """The evaluation the running code belongs to: the one current on this
    thread, else the one whose code is on the stack (a function evaluated code
    defined, run on another thread: its globals hold the state's helpers), as
    long as it runs (an evaluation, or one of its functions)."""
    st = _current()
    if st is not None:
        return st
    f = _getframe(1)
    n = 0
    while f is not None and n < 100:
        h = f.f_globals.get('__sb_tick__')
        if _type(h) is _METHOD:
            st = h.__self__
            if _type(st) is _State and (st.active or st.depth):
                return st
        f = f.f_back
        n += 1
    return None


def _push(st):
    s = _getattr(_TLS, 'stack', None)
    if s is None:
        s = _TLS.stack = []
    s.append(st)


def _pop():
    _TLS.stack.pop()


_SEQ = (str, bytes, bytearray, list, tuple)
_GROWABLE = (str, bytes, bytearray, list)


def _size(x):
    if _isinstance(x, str):
        return _len(x) if x.isascii() else 4 * _len(x)
    if _isinstance(x, (bytes, bytearray)):
        return _len(x)
    return 8 * _len(x)


_HUGE = 1 << 62


def _spec_size(spec):
    """An upper bound of what a format spec's width and precision add: the sum
    of its digit runs."""
    total = 0
    run = ''
    for ch in spec + ' ':
        if '0' <= ch <= '9':
            run += ch
            continue
        if run:
            total += _HUGE if _len(run) > 18 else int(run)
            run = ''
    return total


def _percent_size(fmt, args):
    """An upper bound of the size of fmt % args (str or bytes formatting)."""
    if not _isinstance(fmt, str):
        fmt = bytes(fmt).decode('latin-1')
        unit = 1
    else:
        unit = 1 if fmt.isascii() else 4
    vals = args if _type(args) is tuple else (args,)
    total = _len(fmt)
    L = _len(fmt)
    i = 0
    k = 0
    while True:
        i = fmt.find('%', i)
        if i < 0 or i + 1 >= L:
            break
        i += 1
        if fmt[i] == '%':
            i += 1
            continue
        if fmt[i] == '(':
            depth = 1
            i += 1
            while i < L and depth:
                depth += {'(': 1, ')': -1}.get(fmt[i], 0)
                i += 1
        while i < L and fmt[i] in '-+ #0':
            i += 1
        for _ in (0, 1):
            if i < L and fmt[i] == '*':
                w = vals[k] if k < _len(vals) else 0
                k += 1
                total += w if _type(w) is int and w > 0 else 0
                i += 1
            else:
                j = i
                while i < L and '0' <= fmt[i] <= '9':
                    i += 1
                if i > j:
                    total += _HUGE if i - j > 18 else int(fmt[j:i])
            if i < L and fmt[i] == '.':
                i += 1
                continue
            break
        while i < L and fmt[i] in 'hlL':
            i += 1
        i += 1
        k += 1
    return total * unit


class _State:
    """One evaluation: its profile, budgets and helpers. The helpers bound into
    the namespace are its methods; functions the evaluated code defines keep
    charging this state when they are called later (each outermost call from
    outside an evaluation starts fresh budgets)."""

    def __init__(self, P, engine=None):
        self.P = P
        self.engine = engine
        self.n = 0
        self.depth = 0
        self.active = 0
        self.stop = None
        self.deadline = _monotonic() + P.timeout
        self.made = {}         # id -> object: what the evaluation made, its own to change (see sight)
        self.made_limit = _MADE_SWEEP
        self.made_weight = 0
        self.top = {}          # id -> object: the values of the namespaces the application supplied
        self.origin = {}       # id -> (object, 'sys.path'): containers read from a module, for messages
        self.judged = {}       # id -> (class, len of its __dict__, or -1 when trusted): the class gate
        self.seen = set()      # ids of the callables and descriptors that passed the value gate (see chose)
        self.mods_ok = set()   # ids of the modules that passed the module gate
        self.importing = 0     # > 0 while an import the code asked for runs
        self.quiet = 0         # > 0: refusals are not reported (a filtered __dict__)
        self.helpers = {
            '__sb_tick__': self.tick, '__sb_enter__': self.enter, '__sb_leave__': self.leave,
            '__sb_func__': self.func, '__sb_getattr__': self.getattr, '__sb_binop__': self.binop,
            '__sb_iter__': self.iter, '__sb_aiter__': self.aiter, '__sb_format__': self.format,
            '__sb_writable__': self.writable, '__sb_check__': self.check, '__sb_slice__': slice,
            '__sb_ret__': self.ret, '__sb_augop__': self.augop, '__sb_annot__': self.annot,
            '__sb_item__': self.item, '__sb_own__': self.own_new, '__sb_deco__': self.deco,
        }
        self.own = set(id(v) for k, v in self.helpers.items() if k != '__sb_slice__')
        self.own.add(id(self))
        self._builtins = None
        _refresh()

    # -- budgets

    def interrupt(self, budget, limit, message=None):
        self.stop = (budget, limit, message)
        self.again()

    def again(self):
        e = Interrupted(*self.stop)
        self.report(e)
        raise e

    def report(self, e):
        eng = self.engine
        if eng is not None and eng.report is not None:
            try:
                eng.report(e)
            except Exception:
                pass

    def rearm(self):
        self.n = 0
        self.stop = None
        self.deadline = _monotonic() + self.P.timeout
        # What earlier runs made may since have been handed to the application:
        # a call from outside starts with nothing of its own.
        self.made = {}
        self.made_limit = _MADE_SWEEP
        self.made_weight = 0

    def tick(self):
        if self.stop is not None:
            self.again()
        n = self.n = self.n + 1
        if n > self.P.max_iterations:
            self.interrupt('eval-max-iterations', self.P.max_iterations)
        if not n & 31:
            if _monotonic() > self.deadline:
                self.interrupt('eval-timeout', self.P.timeout)
            if _len(self.made) > self.made_limit:
                self.sweep()

    def check(self):
        if self.stop is not None:
            self.again()

    def enter(self):
        if self.active == 0 and self.depth == 0:
            self.rearm()  # a call from outside any evaluation: fresh budgets
        if self.stop is not None:
            self.again()
        if _monotonic() > self.deadline:
            self.interrupt('eval-timeout', self.P.timeout)
        if self.depth >= self.P.max_call_depth:
            self.interrupt('eval-max-call-depth', self.P.max_call_depth)
        self.depth += 1
        if _len(self.made) > self.made_limit:
            self.sweep()

    def leave(self):
        if self.depth > 0:
            self.depth -= 1

    def iter(self, it):
        tick = self.tick
        value = self.value
        sight = self.sight
        if _type(it) in _HOLDERS:
            # Its items are held by it: the evaluation's when it is.
            look = self.made.get(id(it)) is it
            held = 1
        else:
            look = True  # an iterator, a generator: what it makes is fresh
            held = 0
        for x in it:
            tick()
            if look and _type(x) not in _WT_NO and (_type(x) in _WT_YES or _wt(_type(x))):
                sight(x, held)
            yield x if _type(x) in _PLAIN else value(x)

    async def aiter(self, it):
        tick = self.tick
        value = self.value
        sight = self.sight
        async for x in it:
            tick()
            if _type(x) not in _WT_NO and (_type(x) in _WT_YES or _wt(_type(x))):
                sight(x, 0)
            yield x if _type(x) in _PLAIN else value(x)

    def func(self, fn):
        enter = self.enter
        leave = self.leave

        def call(*a, **k):
            enter()
            try:
                return fn(*a, **k)
            finally:
                leave()
        try:
            call.__name__ = fn.__name__
            call.__qualname__ = fn.__qualname__
        except (AttributeError, TypeError):
            pass
        return call

    def alloc(self, what, size):
        if size > self.P.max_alloc:
            lim = self.P.max_alloc
            self.interrupt('eval-max-alloc', lim,
                           'evaluation interrupted: eval-max-alloc=%d exhausted: %s would allocate about %s bytes'
                           % (lim, what, size if size < _HUGE else 'unbounded'))

    def binop(self, op, l, r):
        if self.stop is not None:
            self.again()
        self.charge(op, l, r)
        v = _OPS[op](l, r)
        t = _type(v)
        if t not in _WT_NO and (t in _WT_YES or _wt(t)):
            self.sight(v, 0)
        return v

    def augop(self, op, cur, v):
        """t op= v, for every operator and every target form: refused when it
        would change in place an object the evaluation did not make (its type
        defines the in-place dunder), charged like the operator otherwise."""
        if self.stop is not None:
            self.again()
        fn, dunder = _AUG_OPS[op]
        self.charge(op, cur, v)
        if _type(cur) not in _IMMUTABLE and _getattr(_type(cur), dunder, None) is not None and \
                self.made.get(id(cur)) is not cur:
            raise self.not_made(cur, "'%s' would change it in place" % op, 'x = x %s y' % op[:-1])
        return fn(cur, v)

    def charge(self, op, l, r):
        """Charge eval-max-alloc for what the operator op would allocate."""
        c = op[0]
        if c == '+':
            if _isinstance(l, _SEQ) and _isinstance(r, _SEQ):
                self.alloc(op, _size(l) + _size(r))
        elif op == '*' or op == '*=':
            if _isinstance(l, int):
                if _isinstance(r, int):
                    if l and r:
                        self.alloc(op, (l.bit_length() + r.bit_length() + 7) // 8)
                elif _isinstance(r, _SEQ) and _type(l) is not bool:
                    self.alloc(op, _size(r) * l)
            elif _isinstance(l, _SEQ) and _isinstance(r, int) and _type(r) is not bool:
                self.alloc(op, _size(l) * r)
        elif c == '*':   # ** and **=
            if _isinstance(l, int) and _isinstance(r, int) and r > 0 and (l > 1 or l < -1):
                bits = l.bit_length() * r
                if bits > self.P.max_alloc * 8:
                    self.alloc(op, (bits + 7) // 8)
        elif c == '<':
            if _isinstance(l, int) and _isinstance(r, int) and l and r > 0:
                bits = l.bit_length() + r
                if bits > self.P.max_alloc * 8:
                    self.alloc(op, (bits + 7) // 8)
        elif c == '%':
            if _isinstance(l, (str, bytes, bytearray)):
                self.alloc(op, _percent_size(l, r))

    def format(self, v, conv, spec):
        if self.stop is not None:
            self.again()
        if conv == 115:
            v = str(v)
        elif conv == 114:
            v = repr(v)
        elif conv == 97:
            v = ascii(v)
        if _type(spec) is str and spec:
            self.alloc('a format spec', _spec_size(spec))
        return _format(v, spec)

    def writable(self, c):
        """The write rule (__sb_writable__): evaluated code writes only into what
        it made (see sight)."""
        if self.made.get(id(c)) is not c:
            raise self.not_made(c, 'a subscript store or delete would change it')
        return c

    def not_made(self, c, how, instead='build a new one: list(x), dict(x), set(x)'):
        """The refusal of a write into c, an object the evaluation did not make."""
        o = self.origin.get(id(c))
        if o is not None and o[0] is c:
            return self.denied(o[1], '', 'write', "evaluated code cannot write into '%s': it belongs to the module "
                               "'%s', which the rest of the process relies on; %s (no eval- rule grants it)."
                               % (o[1], o[2], how))
        return self.denied(_NOT_MADE, '', 'write', "evaluated code cannot write into an object it did not make (the "
                           "application's data, a module's or a library's state, or what a library call handed "
                           "back): %s (no eval- rule grants it): %s instead" % (how, instead))

    # -- what the evaluation made (the write rule)

    def own_new(self, c):
        """A container the code builds (__sb_own__: a display, a comprehension):
        only this call holds it (the count also refuses the helper itself, were
        evaluated code to reach it and hand it something else). The marks are
        swept from tick and enter (a display runs again only in a loop, a
        comprehension or a call) and from scan."""
        if _refcount(c) == _RC_OWN:
            self.made[id(c)] = c
        return c

    def sight(self, v, held):
        """v, of a type writes can change, reaches the code: it is the
        evaluation's when nothing but the code holds it (held 0: what a call,
        an operator or a slice just made) or nothing but a container the
        evaluation made (held 1: an item or an attribute of it). The reference
        count says so exactly: from here, v is referenced by the caller's local,
        this call's argument and getrefcount's, plus its holders (_RC_BASE;
        ret and item count from their own frame, _RC_RET; both are checked when
        the module loads). Anything else (the application's data, a module's
        registry, what a library keeps) stays not the evaluation's."""
        if id(v) not in self.made:
            n = _refcount(v)
            if n == _RC_BASE or n == _RC_BASE + held:
                self.take(v)

    def take(self, v):
        """Mark v, and the containers inside it that only it holds (what a call
        built: json.loads, copy.deepcopy...)."""
        m = self.made
        t = _type(v)
        if t not in _WT_BASE_YES:
            # A view writes into another object: the evaluation's, or nothing
            # (memoryview(rows_bytes), collections.ChainMap(rows_dict)).
            o = _viewed(v, t)
            if o is not None and m.get(id(o)) is not o:
                return
        m[id(v)] = v
        if t is dict:
            items = v.values()
        elif t in _SCANNED:
            items = v
        else:
            return
        n = _len(v)
        if n > 8:
            self.scan(v)
        elif n:
            for x in items:
                if _type(x) not in _WT_NO:
                    break
            else:
                return  # nothing inside writes could change
            del x  # the loop's reference would count as a holder
            self.scan(v)

    def scan(self, v):
        """Mark the containers inside v (marked) that only their container
        holds, up to _SCAN_MAX objects (the rest is marked when read through a
        subscript, an attribute or a comprehension; beyond it, refused)."""
        m = self.made
        stack = [v]
        budget = _SCAN_MAX
        weight = 0
        while stack and budget > 0:
            c = stack.pop()
            t = _type(c)
            if t is dict:
                items = c.values()
            elif t in _SCANNED:
                items = c
            else:
                continue
            n = _len(c)
            weight += n
            budget -= n
            if not n or (n > 32 and not _any_writable(items)):
                continue
            for x in items:
                tx = _type(x)
                if tx in _WT_NO or _refcount(x) != _RC_SCAN or not (tx in _WT_YES or _wt(tx)) or id(x) in m:
                    continue
                m[id(x)] = x
                stack.append(x)
        self.made_weight += weight
        if _len(m) > self.made_limit or self.made_weight > _MADE_WEIGHT:
            self.sweep()

    def sweep(self):
        """Drop the marks of what nothing but the marks hold any more (the marks
        keep their objects alive, so an id is never reused while marked)."""
        m = self.made
        rc = _refcount
        for k in list(m):
            x = m[k]
            if rc(x) == _RC_SWEEP:
                del m[k]
            del x
        self.made_limit = max(_MADE_SWEEP, 2 * _len(m))
        self.made_weight = 0

    def ret(self, v):
        """What a call returns (__sb_ret__): sighted (see sight), then the value
        gate."""
        t = _type(v)
        if t in _PLAIN_DATA:
            return v
        if t in _WT_YES or (t not in _WT_NO and _wt(t)):
            if id(v) not in self.made and _refcount(v) == _RC_RET:
                self.take(v)
            if t in _PLAIN:
                return v
        elif t not in _STATIC_TYPES and _TYPE_FLAGS(t) & _HEAPTYPE and id(v) not in self.made and \
                _refcount(v) == _RC_RET:
            # An object of a Python class just made (a dataclass's): what only
            # it holds (an attribute a factory filled) is the evaluation's too.
            self.made[id(v)] = v
        return self.value(v)

    def item(self, c, k):
        """c[k] (__sb_item__): sighted (held by c, see sight), then the value
        gate."""
        v = c[k]
        t = _type(v)
        if t in _PLAIN_DATA:
            return v
        if t not in _WT_NO and (t in _WT_YES or _wt(t)) and id(v) not in self.made:
            n = _refcount(v)
            if n == _RC_RET or (n == _RC_RET + 1 and self.made.get(id(c)) is c):
                self.take(v)
        if t in _PLAIN:
            return v
        return self.value(v)

    def deco(self, d):
        """A decorator (__sb_deco__): what it returns passes the value gate."""
        value = self.value

        def decorate(x):
            return value(d(x))
        return decorate

    # -- names

    def denied(self, target, rule, kind, message, fix=''):
        e = Denied(message, target, rule, kind, fix)
        if not self.quiet:
            self.report(e)
        return e

    def gate(self, n, kind=None):
        """Check an attribute name; returns it as an exact str."""
        if _type(n) is not str:
            if not _isinstance(n, str):
                raise TypeError('attribute name must be string, not %r' % _type(n).__name__)
            n = str.__str__(n)
        v = self.P.attr_verdict(n)
        if v is not None:
            raise self.denied(n, v[1], kind or v[0], v[3], v[2])
        return n

    def getattr(self, o, n):
        """o.n: the name passes the attribute gate, a module read from passes the
        module gate, and the value passes post."""
        if self.stop is not None:
            self.again()
        n = self.gate(n)
        if id(o) in self.own:
            raise self.denied(n, '', 'frame', "'%s' is denied by the eval guard: the guard's own helpers expose no "
                              "attribute." % n)
        if _len(sys.modules) != _SEEN[0]:
            _refresh()  # patches in place before anything is fetched
        t = _type(o)
        if t is _MODULE or (t not in _PLAIN and _isinstance(o, _MODULE)):
            self.module(o)
        elif t not in _STATIC_VALUES and t not in _PLAIN:
            # A class (or an object of a class) reached around the value gate
            # (a for loop, unpacking) meets the class gate when it is used.
            self.cls_check(o if _isinstance(o, type) else t)
        v = _getattr(o, n)
        if _type(v) not in _WT_NO and (_type(v) in _WT_YES or _wt(_type(v))):
            self.sight(v, 1 if self.made.get(id(o)) is o else 0)
        return self.post(o, n, v)

    def use(self, o):
        """The module gate for an object an attribute is read from."""
        t = _type(o)
        if t is _MODULE or (t not in _PLAIN and _isinstance(o, _MODULE)):
            self.module(o)

    def post(self, o, n, v):
        """The value of the attribute n of o, as evaluated code receives it."""
        if n in _MUTATORS:
            # A method that changes a container in place: refused on a container
            # the evaluation did not make (bound: the object it is bound to,
            # super(list, rows).append too), checked on its first argument
            # (unbound: list.append(rows, x), MutableMapping.update(os.environ, d)).
            r = o
            tv = _type(v)
            if tv is _BUILTIN_METHOD or tv is _METHOD_WRAPPER or tv is _METHOD:
                b = v.__self__
                if b is not None and _type(b) is not _MODULE and not _isinstance(b, type):
                    r = b
            if _isinstance(r, type):
                if callable(v):
                    inner = self.post_value(o, n, v)
                    st = self

                    def unbound(obj, *a, **k):
                        if _writable(_type(obj)) and st.made.get(id(obj)) is not obj:
                            raise st.not_made(obj, "'%s' would change it in place" % n)
                        return inner(obj, *a, **k)
                    return unbound
            elif _writable(_type(r)) and self.made.get(id(r)) is not r:
                raise self.not_made(r, "'%s' would change it in place" % n)
        elif n in _BUFFER_WRITERS and callable(v):
            # file.readinto(buf), socket.recv_into(buf), Struct.pack_into(buf,
            # ...): the buffer is written into.
            inner = self.post_value(o, n, v)
            st = self
            i = 1 if _isinstance(o, type) else 0

            def writes_buffer(*a, **k):
                if _len(a) > i and _writable(_type(a[i])):
                    st.writable(a[i])
                return inner(*a, **k)
            return writes_buffer
        elif _writable(_type(v)):
            self.note_origin(o, n, v)
        return self.post_value(o, n, v)

    def note_origin(self, o, n, v):
        """Remember where a container read from a module (or a module's class)
        comes from, for the refusal of a write into it (sys.path)."""
        t = _type(o)
        if t is _MODULE or _isinstance(o, _MODULE):
            mod = _module_name(o)
            name = '%s.%s' % (mod, n)
        elif _isinstance(o, type):
            mod = _TYPE_DICT(o).get('__module__')
            name = '%s.%s.%s' % (mod, _TYPE_QUALNAME(o), n)
        else:
            return
        if _type(mod) is str:
            if _len(self.origin) >= 4096:
                self.origin.clear()
            self.origin[id(v)] = (v, name, mod)

    def post_value(self, o, n, v):
        if n == '__dict__':
            return self.dict_copy(o, v)
        if n in _FORMAT_NAMES:
            if v is _STR_FORMAT or v is _STR_FORMAT_MAP:
                return self.unbound_format(n)
            if _type(v) is _BUILTIN_METHOD and _isinstance(_getattr(v, '__self__', None), str):
                return self.bound_format(str.__str__(v.__self__), n)
        elif n in _ALLOC_METHODS:
            if _isinstance(o, _GROWABLE) and _type(v) is _BUILTIN_METHOD:
                return _ALLOC_METHODS[n](self, o, v)
            if _isinstance(o, type) and issubclass(o, _GROWABLE) and callable(v):
                return self.unbound_alloc(o, n, v)
        elif n in _GETATTR_NAMES and callable(v):
            return self.g_getattribute(v)
        elif n in _SETATTR_NAMES and callable(v):
            # object.__setattr__, type.__setattr__, super().__setattr__...: the
            # sub-language never sets attributes (a module's, a class's
            # special methods, the application's objects).
            raise self.denied(n, '', 'attribute', "'%s' is denied by the eval guard: the sub-language never sets "
                              "or deletes attributes (no eval- rule grants it)." % n)
        elif n == 'register' and _type(v) is _FUNCTION and _FN_CODE(v) is _SD_REGISTER[0] and \
                _type(o) is _FUNCTION and _held_by_module(o, _FN_MODULE(o), _getattr(o, '__qualname__', None)):
            # The registry of a singledispatch function a module defines: the
            # dispatch of every caller in the process would change.
            raise self.denied('functools.singledispatch', '', 'write', "evaluated code cannot register an "
                              "implementation on a singledispatch function it did not make: the whole process "
                              "dispatches through it (no eval- rule grants it).")
        C = _CARRIED_CLASSES[0]
        if C and callable(v) and (_isinstance(o, C) or (_isinstance(o, type) and issubclass(o, C))):
            # The methods of the patched formatters carry the evaluation to any
            # thread they are handed to (their classes were patched when their
            # module was first seen, before anything could be fetched from it).
            return self.carry(v)
        return self.value(v, o, n)

    def dict_copy(self, o, d):
        """o.__dict__ (vars(o)): a new dict holding the names the attribute gate
        allows, each value as reading that attribute would give it (a value the
        value gate refuses is left out). Writing into it changes nothing."""
        try:
            items = list(d.items())
        except (AttributeError, TypeError):
            raise self.denied('__dict__', '', 'magic', "'__dict__' is denied by the eval guard: this object's "
                              "__dict__ is not a mapping the guard can filter.") from None
        out = {}
        verdict = self.P.attr_verdict
        self.quiet += 1
        try:
            for k, x in items:
                if _type(k) is not str or verdict(k) is not None:
                    continue
                try:
                    out[k] = self.post(o, k, x)
                except Denied:
                    continue
        finally:
            self.quiet -= 1
        return out

    def value(self, v, parent=None, n=None):
        """The value gate (__sb_ret__): what a call returns, a subscript, an item a
        comprehension iterates, an attribute (post), a name taken from a module.
        A module must pass the module gate; a helper that resolves names or source
        from strings is replaced by its guarded form or refused."""
        t = _type(v)
        if t in _PLAIN:
            return v
        if t is _MODULE or _isinstance(v, _MODULE):
            via = None
            if parent is not None and (_type(parent) is _MODULE or _isinstance(parent, _MODULE)):
                pn = _module_name(parent)
                if pn is not None:
                    via = pn + '.' + n
            return self.module(v, via)
        if t not in _STATIC_VALUES:
            if _isinstance(v, type):
                self.cls_check(v)
            else:
                self.cls_check(t)
        if t is _BUILTIN_METHOD:
            b = v.__self__
            if (b is None or _type(b) is _MODULE or _isinstance(b, type)) and _len(self.seen) < _SEEN_MAX:
                self.seen.add(id(v))  # the code holds it (see chose)
        elif t is not _METHOD and t is not _METHOD_WRAPPER and not _inert(t) and _len(self.seen) < _SEEN_MAX:
            # A callable or a descriptor the code holds (see chose); a method
            # bound to an object is the code's choice anyway.
            self.seen.add(id(v))
        if t is _METHOD and _type(v.__self__) is _State and v.__func__ in _HELPER_FUNCS:
            k = _HELPER_FUNCS[v.__func__]
            raise self.denied(k, '', 'frame', "'%s' is denied by the eval guard: the guard's own helpers are not "
                              "values evaluated code may hold (no eval- rule grants it)." % k)
        if _len(sys.modules) != _SEEN[0]:
            _refresh()
        f = v.__func__ if t is _METHOD else v
        h = _HELPERS.get(id(f))
        if h is not None and h[0] is f:
            how, what = h[1], h[2]
        else:
            if _type(f) not in _NAMED_TYPES and not _isinstance(f, type):
                return v
            k = _names_of(f)
            h = _HELPER_NAMES.get(k) if k is not None else None
            if h is None:
                return v
            how, what = h
        if not how.startswith('g_'):
            raise self.denied(what, '', 'helper', "'%s' is denied by the eval guard: %s (no eval- rule grants it)."
                              % (what, how))
        return _getattr(self, how)(v, what)

    # -- the class gate

    def cls_check(self, C):
        """The class gate: a class evaluated code reaches (or the class of an
        object it reaches) defines special methods only as a class statement
        could (see cls_judge); judged once, again when its __dict__ changes."""
        if C in _STATIC_TYPES:
            return
        if not _TYPE_FLAGS(C) & _HEAPTYPE:
            _STATIC_TYPES.add(C)
            if not _TYPE_FLAGS(C) & _TYPE_SUBCLASS:
                _STATIC_VALUES.add(C)  # its instances are not classes: nothing to judge
            return
        e = self.judged.get(id(C))
        if e is not None and e[0] is C and (e[1] < 0 or e[1] == _len(_TYPE_DICT(C))):
            return
        self.cls_judge(C)

    def cls_judge(self, C):
        """A class a module defines, or one the application supplied, is
        trusted. Any other one (built by a class statement, a metaclass call,
        types.new_class, the functional Enum API, namedtuple, make_dataclass, a
        decorator that sets methods, ...) passes the gate of a class statement
        for every special method it defines, whatever built it: each dunder in
        its __dict__ that is not the library's own implementation (see
        _defines) needs eval-magic, and the class then needs eval-syntax=class.
        Its metaclass and its bases pass the gate too."""
        judged = self.judged
        if _len(judged) >= 4096:
            judged.clear()
        if self.top.get(id(C)) is C or _registered(C):
            judged[id(C)] = (C, -1)
            return
        mro = _TYPE_MRO(C)
        M = _type(C)
        if M is not type:
            self.cls_check(M)
        for B in mro[1:]:
            self.cls_check(B)
        d = _TYPE_DICT(C)
        n = _len(d)
        chose = self.chose
        defined = [k for k, v in list(d.items()) if _type(k) is str and _is_dunder(k) and _defines(k, v, mro, chose)]
        P = self.P
        for k in defined:
            v = P.attr_verdict(k)
            if v is not None:
                raise self.class_denied(C, k, v[1], v[2])
        if defined and not P.classes:
            raise self.class_denied(C, defined[0], 'eval-syntax', P.rule('eval-syntax', 'class'))
        judged[id(C)] = (C, n)

    def class_denied(self, C, k, rule, fix):
        try:
            qn = _TYPE_QUALNAME(C)
        except (TypeError, AttributeError):
            qn = '?'
        head = ("the class '%s' defines the special method '%s' (the interpreter calls it implicitly), and a class "
                "that defines it passes the gate of a class statement, whatever built it" % (qn, k))
        if rule == 'eval-syntax':
            return self.denied('ClassDef', rule, 'syntax', "a class definition is denied by the eval guard: %s. "
                               "Add `%s` to allow it." % (head, fix), fix)
        if fix:
            return self.denied(k, rule, 'magic', "'%s' is denied by the eval guard: %s. Add `%s` to allow it."
                               % (k, head, fix), fix)
        return self.denied(k, rule, 'frame' if k in _INTERNALS else 'reserved' if k.startswith(_RESERVED) else
                           'magic', "'%s' is denied by the eval guard: %s (no eval- rule grants it)." % (k, head))

    def chose(self, v):
        """True when evaluated code held v (see _defines): it passed the value
        gate, it is a builtin of eval-call, the application supplied it (or the
        record is full: then anything counts)."""
        i = id(v)
        return i in self.seen or self.top.get(i) is v or _len(self.seen) >= _SEEN_MAX

    def mutable_target(self, o, what):
        """o may be changed in place by the helper what (it sets attributes or
        special methods on it): a class or a function evaluated code made, or an
        object it made; a class a module defines or the application supplied,
        a module, a library's function are refused."""
        if _isinstance(o, type):
            if _TYPE_FLAGS(o) & _HEAPTYPE and self.top.get(id(o)) is not o and not _registered(o):
                self.judged.pop(id(o), None)
                return
            try:
                name = _TYPE_QUALNAME(o)
            except (TypeError, AttributeError):
                name = '?'
        elif _type(o) is _FUNCTION and _eval_function(o) and (_FN_GLOBALS(o) is not _GUARD_GLOBALS or
                                                             _FN_CODE(o) is _LAMBDA_CODE):
            return
        elif self.made.get(id(o)) is o:
            return
        elif _isinstance(o, _MODULE):
            name = _module_name(o)
        else:
            name = _getattr(o, '__qualname__', None)
            if _type(name) is not str:
                name = _type(o).__name__ + ' object'
        raise self.denied(name or '?', '', 'write', "evaluated code cannot change '%s' through %s: it did not make it "
                          "(a class or module the process defines, or the application's) (no eval- rule grants it)."
                          % (name, what))

    def module(self, m, via=None):
        """The module gate: m passes when eval-import allows its name (or the
        dotted name it is registered under and was reached by), or when the
        application supplied it; a module no rule grants is refused."""
        i = id(m)
        if i in self.mods_ok:
            return m
        name = _module_name(m)
        if i not in _SIGHTED and name in _WATCHED_SET:
            _sight(m, name)
        names = [name] if name is not None else []
        if via is not None and via != name and sys.modules.get(via) is m:
            names.append(via)
        never = None
        for x in names:
            never = never or _never(x)
        ok = never is None and any(self.P.imp.allows(x) for x in names)
        if not ok and self.top.get(i) is not m:
            shown = name if name is not None else '<module>'
            reached = " (reached as %s)" % via if via is not None and via != name else ''
            if never is not None or name is None:
                why = never or 'it has no name the eval-import rules can judge'
                raise self.denied(shown, '', 'import', "the module '%s'%s is denied by the eval guard: %s (no eval- "
                                  "rule grants it)." % (shown, reached, why))
            fix = self.P.rule('eval-import', name)
            raise self.denied(name, 'eval-import', 'import', "the module '%s'%s is denied by the eval guard: "
                              "eval-import does not allow it. Add `%s` to allow it." % (name, reached, fix), fix)
        self.mods_ok.add(i)
        return m

    def annot(self, v):
        """An annotation (__sb_annot__): a string type is refused, since
        typing.get_type_hints would evaluate it later with the raw eval."""
        if _annot_has_string(v, 0):
            raise self.denied('annotation', '', 'helper', "a string type annotation is denied by the eval guard: "
                              "typing.get_type_hints evaluates it with the raw eval, outside the guard (no eval- "
                              "rule grants it): write the type itself.")
        return v

    def unbound_alloc(self, cls, n, m):
        st = self

        def unbound(self, *a, **k):
            if not _isinstance(self, cls):
                return m(self, *a, **k)  # the descriptor raises its own TypeError
            return _ALLOC_METHODS[n](st, self, _getattr(self, n))(*a, **k)
        return unbound

    def carry(self, fn):
        st = self

        def carried(*a, **k):
            _push(st)
            try:
                return fn(*a, **k)
            finally:
                _pop()
        return carried

    # -- helpers that resolve names from strings (see _HELPER_SPECS)

    def g_type(self, v, what):
        # The metaclass: the type() shim stands for it, as for type(int).
        b = self._builtins
        return b['type'] if b and 'type' in b else self.s_type

    def g_getattribute(self, v):
        """A __getattribute__ or __getattr__ method: the name it is given passes
        the attribute gate and what it returns passes post."""
        st = self
        if _type(v) in (_METHOD_WRAPPER, _METHOD, _BUILTIN_METHOD):
            obj = v.__self__

            def bound(name, *rest):
                n = st.gate(name)
                st.use(obj)
                _refresh()
                return st.post(obj, n, v(n, *rest))
            return bound

        def unbound(obj, name, *rest):
            n = st.gate(name)
            st.use(obj)
            _refresh()
            return st.post(obj, n, v(obj, n, *rest))
        return unbound

    def g_attrgetter(self, v, what):
        st = self

        def attrgetter(attr, *attrs):
            chains = []
            for a in (attr,) + attrs:
                if not _isinstance(a, str):
                    raise TypeError('attribute name must be a string')
                chains.append(tuple(st.gate(p) for p in str.__str__(a).split('.')))

            def get(obj):
                out = []
                for chain in chains:
                    o = obj
                    for p in chain:
                        o = st.getattr(o, p)
                    out.append(o)
                return out[0] if _len(out) == 1 else tuple(out)
            return get
        return attrgetter

    def g_methodcaller(self, v, what):
        st = self

        def methodcaller(name, *args, **kwargs):
            if not _isinstance(name, str):
                raise TypeError('method name must be a string')
            n = st.gate(name)

            def call(obj):
                return st.getattr(obj, n)(*args, **kwargs)
            return call
        return methodcaller

    def g_store(self, v, what):
        st = self

        def store(c, *a):
            return v(st.writable(c), *a)
        return store

    def g_inplace(self, v, what):
        st = self
        op = _INPLACE_FUNCS[what.rsplit('.', 1)[1]]

        def inplace(a, b):
            return st.augop(op, a, b)
        return inplace

    def g_arith(self, v, what):
        st = self
        op = _ARITH_FUNCS[what.rsplit('.', 1)[1]]

        def arith(a, b):
            st.charge(op, a, b)
            return v(a, b)
        return arith

    def g_getattr_static(self, v, what):
        st = self

        def getattr_static(obj, attr, *default):
            n = st.gate(attr)
            st.use(obj)
            _refresh()
            return st.post(obj, n, v(obj, n, *default))
        return getattr_static

    def g_unwrap(self, v, what):
        st = self

        def unwrap(func, *, stop=None):
            st.gate('__wrapped__')
            return v(func, stop=stop)
        return unwrap

    def g_no_eval_str(self, v, what):
        st = self

        def no_eval_str(*a, **k):
            if k.get('eval_str'):
                raise st.denied(what, '', 'helper', "'%s' with eval_str=True is denied by the eval guard: it "
                                "evaluates string annotations with the raw eval (no eval- rule grants it)." % what)
            return v(*a, **k)
        return no_eval_str

    def g_fields(self, v, what):
        st = self
        deep = not what.endswith('.replace')

        def fields(*a, **k):
            if a:
                st.gate_fields(a[0], deep)
            return v(*a, **k)
        return fields

    def gate_fields(self, obj, deep):
        """Every field name a dataclass helper reads by name (asdict and astuple
        recurse into nested dataclasses, lists, tuples and dicts) passes the
        attribute gate."""
        dc = sys.modules.get('dataclasses')
        fields = _getattr(dc, 'fields', None)
        stack = [obj]
        seen = set()
        while stack:
            o = stack.pop()
            if id(o) in seen:
                continue
            seen.add(id(o))
            t = _type(o)
            if fields is not None and not _isinstance(o, type) and _hasattr(t, '__dataclass_fields__'):
                for f in fields(o):
                    self.gate(f.name)
                    if deep:
                        stack.append(_getattr(o, f.name))
            elif deep and _isinstance(o, (list, tuple)):
                stack.extend(o)
            elif deep and _isinstance(o, dict):
                stack.extend(o.keys())
                stack.extend(o.values())

    def g_make_dataclass(self, v, what):
        st = self

        def make_dataclass(cls_name, fields, *a, **k):
            fields = list(fields)
            for f in fields:
                name = f if _isinstance(f, str) else (f[0] if _isinstance(f, (tuple, list)) and f else None)
                if name is not None:
                    st.gate(name)
                if _isinstance(f, (tuple, list)) and _len(f) > 1:
                    st.annot(f[1])
            ns = k.get('namespace')
            if ns is not None:
                for key in ns:
                    st.gate(key)
            if _MAKE_DATACLASS_MODULE and 'module' not in k:
                # The module of the class is that of the code asking (it would
                # otherwise be the guard's, this wrapper being the caller).
                k['module'] = _getframe(1).f_globals.get('__name__', '<eval>')
            return v(cls_name, fields, *a, **k)
        return make_dataclass

    def g_mutator(self, v, what):
        """A helper that sets attributes or special methods on its first
        argument (functools.total_ordering, abc.update_abstractmethods,
        typing.final...): only on what evaluated code made; a class it changed
        passes the class gate again (what it returns, the value gate)."""
        st = self

        def mutator(o, *a, **k):
            st.mutable_target(o, what)
            return st.value(v(o, *a, **k))
        return mutator

    def g_dataclass(self, v, what):
        """dataclasses.dataclass, with or without its options."""
        st = self

        def dataclass(cls=None, /, **k):
            def wrap(c):
                st.mutable_target(c, what)
                return st.value(v(c, **k))
            return wrap if cls is None else wrap(cls)
        return dataclass

    def g_update_wrapper(self, v, what):
        """functools.update_wrapper: the wrapper is something evaluated code
        made, and a name beyond the defaults passes the attribute gate (the
        helper reads it from wrapped and sets it on wrapper)."""
        st = self
        fn = sys.modules.get('functools')
        dflt = (_getattr(fn, 'WRAPPER_ASSIGNMENTS', ()), _getattr(fn, 'WRAPPER_UPDATES', ()))
        raw = _getattr(fn, 'update_wrapper', None) if what.endswith('.wraps') else v

        def update_wrapper(wrapper, wrapped, assigned=dflt[0], updated=dflt[1]):
            st.mutable_target(wrapper, what)
            assigned = tuple(assigned)
            updated = tuple(updated)
            for n in assigned + updated:
                if n not in dflt[0] and n not in dflt[1]:
                    st.gate(n)
            return st.value(raw(wrapper, wrapped, assigned, updated))
        if what.endswith('.wraps'):
            def wraps(wrapped, assigned=dflt[0], updated=dflt[1]):
                return lambda wrapper: update_wrapper(wrapper, wrapped, assigned, updated)
            return wraps
        return update_wrapper

    def g_abc_register(self, v, what):
        """ABCMeta.register (Sized.register(C)): a registry of the ABC; only on
        an ABC evaluated code made."""
        st = self
        if _type(v) is _METHOD:
            abc_cls = v.__self__

            def register(subclass):
                st.mutable_target(abc_cls, what)
                return st.value(v(subclass))
            return register

        def register_unbound(cls, subclass):
            st.mutable_target(cls, what)
            return st.value(v(cls, subclass))
        return register_unbound

    def g_writes_arg(self, v, what):
        """A helper that changes its first argument in place (random.shuffle,
        heapq, bisect.insort; struct.pack_into its second): the write rule."""
        st = self
        i = 1 if what in _WRITES_SECOND else 0
        if _type(v) is _FUNCTION and '.' in _getattr(v, '__qualname__', ''):
            i += 1  # a method reached through its class (random.Random.shuffle): self comes first

        def writes(*a, **k):
            if _len(a) > i:
                st.writable(a[i])
            else:
                for x in k.values():
                    if _writable(_type(x)):
                        st.writable(x)
            return v(*a, **k)
        return writes

    def g_writes_buffers(self, v, what):
        """os.readv and os.preadv: every buffer they fill is the evaluation's."""
        st = self

        def writes(fd, buffers, *a, **k):
            buffers = list(buffers)
            for b in buffers:
                st.writable(b)
            return v(fd, buffers, *a, **k)
        return writes

    def g_rng(self, v, what):
        """random.seed and random.setstate: refused on the generator the random
        module shares with the whole process (a random.Random of one's own may
        be seeded)."""
        st = self
        shared = _getattr(sys.modules.get('random'), '_inst', None)

        def check(o):
            if o is shared and shared is not None:
                raise st.denied(what, '', 'helper', "'%s' is denied by the eval guard: it changes the generator the "
                                "random module shares with the whole process (no eval- rule grants it): use a "
                                "random.Random(seed) of your own." % what)
        if _type(v) is _METHOD:
            check(v.__self__)
            return v

        def unbound(o, *a, **k):
            check(o)
            return v(o, *a, **k)
        return unbound

    # -- str.format

    def check_template(self, tpl):
        for n in _template_attrs(tpl):
            self.gate(n, 'format')

    def vformat(self, tpl, args, kwargs):
        self.check_template(tpl)
        out, _ = self._vformat(tpl, args, kwargs, 2, 0)
        return ''.join(out)

    def _vformat(self, tpl, args, kwargs, depth, auto):
        if depth < 0:
            raise ValueError('Max string recursion exceeded')
        out = []
        for literal, field, spec, conv in _string.formatter_parser(tpl):
            if literal:
                out.append(literal)
            if field is None:
                continue
            first, rest = _string.formatter_field_name_split(field)
            if first == '':
                if auto is False:
                    raise ValueError('cannot switch from manual field specification to automatic field numbering')
                first = auto
                auto += 1
            elif _type(first) is int:
                if auto:
                    raise ValueError('cannot switch from automatic field numbering to manual field specification')
                auto = False
            obj = args[first] if _type(first) is int else kwargs[first]
            for is_attr, i in rest:
                obj = self.getattr(obj, i) if is_attr else obj[i]
            if conv == 's':
                obj = str(obj)
            elif conv == 'r':
                obj = repr(obj)
            elif conv == 'a':
                obj = ascii(obj)
            elif conv is not None:
                raise ValueError('Unknown conversion specifier %s' % conv)
            if spec and '{' in spec:
                parts, auto = self._vformat(spec, args, kwargs, depth - 1, auto)
                spec = ''.join(parts)
            if spec:
                self.alloc('a format spec', _spec_size(spec))
            out.append(_format(obj, spec or ''))
        return out, auto

    def bound_format(self, s, n):
        st = self
        if n == 'format':
            def format(*args, **kwargs):
                return st.vformat(s, args, kwargs)
            return format

        def format_map(mapping):
            return st.vformat(s, (), mapping)
        return format_map

    def unbound_format(self, n):
        st = self
        if n == 'format':
            def format(self, *args, **kwargs):
                if not _isinstance(self, str):
                    raise TypeError("descriptor 'format' for 'str' objects doesn't apply to a '%s' object"
                                    % _type(self).__name__)
                return st.vformat(str.__str__(self), args, kwargs)
            return format

        def format_map(self, mapping):
            if not _isinstance(self, str):
                raise TypeError("descriptor 'format_map' for 'str' objects doesn't apply to a '%s' object"
                                % _type(self).__name__)
            return st.vformat(str.__str__(self), (), mapping)
        return format_map

    # -- namespace

    def builtins(self):
        b = self._builtins
        if b is not None:
            return b
        P = self.P
        shims = {
            'getattr': self.s_getattr, 'hasattr': self.s_hasattr, 'vars': self.s_vars, 'setattr': self.s_setattr,
            'delattr': self.s_delattr, 'type': self.s_type, 'dir': self.s_dir, 'globals': self.s_globals,
            'locals': self.s_locals, 'breakpoint': self.s_breakpoint, 'pow': self.s_pow, 'format': self.s_format,
            'eval': self.s_eval, 'exec': self.s_exec, 'compile': self.s_compile, 'help': self.s_help,
            '__build_class__': self.s_build_class,
        }
        b = {}
        for name in P.builtin_names:
            s = shims.get(name)
            if s is not None:
                b[name] = s
                self.own.add(id(s))
            elif name != '__import__':
                b[name] = _RAW[name]
        if P.classes and '__build_class__' not in b:
            b['__build_class__'] = self.s_build_class
            self.own.add(id(b['__build_class__']))
        if P.import_syntax or '__import__' in P.builtin_names:
            # One import for the statements and for __import__() granted by
            # eval-call: eval-import judges every module, then the Python layer.
            b['__import__'] = self.s_import
            self.own.add(id(b['__import__']))
        self.seen.update(id(v) for v in b.values())  # the code holds them (see chose)
        # Marks a builtins dict the guard built (no source can name the key).
        b['__sb_builtins__'] = True
        self._builtins = b
        return b

    def namespace(self, names=None):
        """A new namespace: __builtins__ from eval-call, the helpers, then names."""
        ns = {'__builtins__': self.builtins(), '__name__': self.P.source_ref}
        ns.update(self.helpers)
        if names:
            if _type(names) is not dict:
                names = dict(names)
            for k in names:
                if _type(k) is str and k.startswith(_RESERVED):
                    raise ValueError('eval guard: the name %r uses the reserved prefix __sb_' % k)
            if '__builtins__' in names and self.P.namespace == 'closed':
                raise ValueError('eval guard: names may not hold __builtins__ under eval-namespace=closed')
            ns.update(names)
            self.supplied(names)
        return ns

    def inplace(self, g, app=True):
        """The caller's globals, used in place (eval-namespace=adaptive): a
        missing __builtins__ is built from eval-call, a present one is kept."""
        cur = g.get('__builtins__')
        if cur is None or (_type(cur) is dict and cur.get('__sb_builtins__') is True):
            # Missing, or left by an earlier evaluation (its shims belong to it).
            g['__builtins__'] = self.builtins()
        if app:
            self.supplied(g)  # as supplied, before the code binds anything
        g.update(self.helpers)
        return g

    def supplied(self, ns):
        """Note the values of a namespace the application supplied (names, the
        caller's globals or locals): a module among them passes the module gate,
        a class among them, or the class of an object among them, is the
        application's (the class gate trusts it).
        Nothing is walked: what evaluated code may write into is decided by what
        it made (see sight)."""
        top = self.top
        try:
            values = list(ns.values())
        except Exception:
            return  # a mapping evaluated code passed as locals
        for v in values:
            top[id(v)] = v
            t = _type(v)
            if _TYPE_FLAGS(t) & _HEAPTYPE:
                top[id(t)] = t  # the class of an object the application supplied is the application's

    def execute(self, code, ns, locals_, mode, writable):
        if locals_ is not None and locals_ is not ns:
            self.supplied(locals_)
        _refresh()
        _push(self)
        self.active += 1
        try:
            if mode == 'eval':
                r = _eval(code, ns, locals_ if locals_ is not None else ns)
            else:
                _exec(code, ns, locals_ if locals_ is not None else ns)
                r = None
        except Interrupted:
            raise
        except BaseException:
            if self.stop is None:
                raise
            # The code swallowed an interruption, then failed: the interruption wins.
            raise Interrupted(*self.stop) from None
        finally:
            self.active -= 1
            _pop()
            if not self.active and not self.depth:
                # What it made is the application's now (and stops being kept).
                self.made = {}
        if self.stop is not None:
            # The code swallowed an interruption (a context manager's __exit__, a
            # return in a finally block): the evaluation still ends interrupted.
            raise Interrupted(*self.stop)
        return r

    # -- shims of the builtins

    def s_getattr(self, o, n, *default):
        if _len(default) > 1:
            raise TypeError('getattr expected at most 3 arguments, got %d' % (2 + _len(default)))
        n = self.gate(n)
        if not default:
            return self.getattr(o, n)
        try:
            return self.getattr(o, n)
        except AttributeError:
            return default[0]

    def s_hasattr(self, o, n):
        n = self.gate(n)
        try:
            self.getattr(o, n)
        except AttributeError:
            return False
        return True

    def s_vars(self, *o):
        if not o:
            raise self.denied('vars', 'eval-call', 'call', "vars() with no argument is denied by the eval guard: "
                              "it would expose the evaluation's namespace.")
        if _len(o) > 1:
            raise TypeError('vars expected at most 1 argument, got %d' % _len(o))
        return self.getattr(o[0], '__dict__')

    def s_setattr(self, *a):
        raise self.denied('setattr', 'eval-attribute', 'attribute', "setattr() is denied by the eval guard: the "
                          "sub-language never mutates attributes (no eval- rule grants it).")

    def s_delattr(self, *a):
        raise self.denied('delattr', 'eval-attribute', 'attribute', "delattr() is denied by the eval guard: the "
                          "sub-language never mutates attributes (no eval- rule grants it).")

    def s_type(self, *a, **k):
        if _len(a) == 1 and not k:
            # The metaclass itself would be the class factory: the shim stands
            # for it (type(int) is type holds in the evaluated code); any other
            # type passes the value gate (a helper's class, FunctionType).
            return self.value(_type(a[0]))
        raise self.denied('type', 'eval-call', 'call', "type() with three arguments creates a class: it is denied "
                          "by the eval guard (only type(x) is allowed).")

    def s_dir(self, *o):
        if not o:
            raise self.denied('dir', 'eval-call', 'call', "dir() with no argument is denied by the eval guard: it "
                              "would expose the evaluation's namespace.")
        if _len(o) > 1:
            raise TypeError('dir expected at most 1 argument, got %d' % _len(o))
        if id(o[0]) in self.own:
            return []
        P = self.P
        return [n for n in dir(o[0]) if _type(n) is str and P.attr_verdict(n) is None]

    def s_build_class(self, func, name, *bases, **kw):
        """A class statement: the class it builds passes the class gate (its
        metaclass, its bases' __init_subclass__ and what they add included)."""
        return self.value(_RAW['__build_class__'](func, name, *bases, **kw))

    def s_globals(self):
        raise self.denied('globals', 'eval-call', 'call', "globals() is denied by the eval guard: it would expose "
                          "the evaluation's namespace (no eval- rule grants it).")

    def s_locals(self):
        f = sys._getframe(1)
        loc = f.f_locals
        del f
        return {k: v for k, v in loc.items() if not (_type(k) is str and k.startswith(_RESERVED))
                and k != '__builtins__'}

    def s_breakpoint(self, *a, **k):
        raise self.denied('breakpoint', 'eval-call', 'call', "breakpoint() is denied by the eval guard (no eval- "
                          "rule grants it).")

    def s_help(self, *a, **k):
        raise self.denied('help', 'eval-call', 'call', "help() is denied by the eval guard: it resolves dotted names "
                          "from strings and imports modules by name, around eval-import (no eval- rule grants it).")

    def s_pow(self, base, exp, mod=None):
        if mod is None:
            return self.binop('**', base, exp)
        return _RAW['pow'](base, exp, mod)

    def s_format(self, value, spec=''):
        if _type(spec) is str and spec:
            self.alloc('format()', _spec_size(spec))
        return _format(value, spec)

    def s_import(self, name, globals=None, locals=None, fromlist=(), level=0):
        """import and from-import (and __import__() when eval-call grants it):
        the module passes eval-import, then the Python layer's import rules.
        With a fromlist the result is a holder of the names taken, each through
        the attribute gate, each module among them through the module gate."""
        if level:
            raise self.denied(name, 'eval-import', 'import', 'relative imports are denied by the eval guard: name '
                              'the module in full.')
        if _type(name) is not str:
            raise TypeError('module name must be str, not %s' % _type(name).__name__)
        self.import_gate(name)
        if not fromlist:
            # The root module: bound by `import a.b` (the statement's root is
            # checked statically), walked by `import a.b as c` (the module
            # registered as a.b is granted by its name); an __import__() call's
            # result passes the value gate.
            root = self.imported(name, ())
            leaf = sys.modules.get(name)
            if leaf is not None:
                self.mods_ok.add(id(leaf))
            return root
        items = []
        for item in fromlist:
            if _type(item) is not str:
                raise TypeError('Item in from list must be str')
            if item == '*':
                raise self.denied(name + '.*', 'eval-import', 'import', 'a star import is denied by the eval '
                                  'guard: import the names you need.')
            items.append(self.gate(item))
        self.imported(name, ())
        leaf = sys.modules.get(name)
        for item in items:
            if leaf is not None and not _hasattr(leaf, item):
                self.import_gate(name + '.' + item)  # it would import a submodule
        mod = self.imported(name, tuple(items))
        self.mods_ok.add(id(mod))
        holder = _FromList()
        d = holder.__dict__
        for item in items:
            try:
                v = _getattr(mod, item)
            except AttributeError:
                raise ImportError('cannot import name %r from %r' % (item, name), name=name) from None
            d[item] = self.post(mod, item, v)
        return holder

    def import_gate(self, name):
        never = _never(name)
        if never is not None:
            raise self.denied(name, '', 'import', "importing '%s' is denied by the eval guard: %s (no eval- rule "
                              "grants it)." % (name, never))
        if not self.P.imp.allows(name):
            fix = self.P.rule('eval-import', name)
            raise self.denied(name, 'eval-import', 'import', "importing '%s' is denied by the eval guard. Add "
                              "`%s` to allow it." % (name, fix), fix)

    def imported(self, name, fromlist):
        self.importing += 1
        try:
            return _user_import(name, None, None, fromlist, 0)
        finally:
            self.importing -= 1
            _refresh()
            m = sys.modules.get(name)
            if m is not None and id(m) not in _SIGHTED and name in _WATCHED_SET:
                _sight(m, name)

    def s_eval(self, source, globals=None, locals=None):
        return self.nested('eval', source, globals, locals)

    def s_exec(self, source, globals=None, locals=None, *, closure=None):
        if closure is not None:
            raise TypeError('exec() closure is not accepted by the eval guard')
        self.nested('exec', source, globals, locals)

    def s_compile(self, source, filename, mode, flags=0, dont_inherit=False, optimize=-1, *, _feature_version=-1):
        eng = self.engine or _LOCAL_ENGINE
        return eng._compile(self.P, source, mode, flags)

    def nested(self, mode, source, g, l):
        """eval/exec reached from evaluated code: the same profile and budgets."""
        eng = self.engine or _LOCAL_ENGINE
        code, writable = eng._code_for(self.P, source, mode)
        if g is None or self.P.namespace == 'closed':
            ns = self.namespace()
            l = None
        else:
            if _type(g) is not dict:
                raise TypeError('globals must be a dict')
            # The code binds its names in g (and l): dicts the evaluation made.
            for d in (g, l):
                if d is not None and self.made.get(id(d)) is not d:
                    raise self.not_made(d, '%s() would bind names in it' % mode, 'pass a dict of its own: %s(src, '
                                        'dict(x))' % mode)
            # The code runs in a copy of g holding the builtins and the helpers,
            # and what it binds is copied back: no dict the code holds ever
            # holds the guard's helpers. (A function it defines keeps the copy
            # as its globals.)
            ns = self.inplace(dict(g), False)
            self.active += 1
            try:
                if mode == 'eval':
                    return _eval(code, ns, l if l is not None else ns)
                _exec(code, ns, l if l is not None else ns)
                return None
            finally:
                self.active -= 1
                for k in [k for k in g if k not in ns]:
                    del g[k]
                for k, v in ns.items():
                    if k != '__builtins__' and not (_type(k) is str and k.startswith(_RESERVED)) and \
                            (k not in g or g[k] is not v):
                        g[k] = v
        self.active += 1
        try:
            if mode == 'eval':
                return _eval(code, ns, l if l is not None else ns)
            _exec(code, ns, l if l is not None else ns)
            return None
        finally:
            self.active -= 1


# The code of the wrapper of a lambda evaluated code defines (_State.func).
_LAMBDA_CODE = [c for c in _State.func.__code__.co_consts if _type(c) is _CODE and c.co_name == 'call'][0]
_MAKE_DATACLASS_MODULE = sys.version_info >= (3, 12)


def _alloc_width(st, o, m):
    unit = 1 if _isinstance(o, (bytes, bytearray)) or o.isascii() else 4

    def w(width, *a, **k):
        if _isinstance(width, int):
            st.alloc(m.__name__ + '()', width * unit)
        return m(width, *a, **k)
    return w


def _alloc_expandtabs(st, o, m):
    def expandtabs(tabsize=8):
        tabs = o.count('\t' if _isinstance(o, str) else b'\t')
        if _isinstance(tabsize, int) and tabsize > 0:
            st.alloc('expandtabs()', _size(o) + tabs * tabsize)
        return m(tabsize)
    return expandtabs


def _alloc_replace(st, o, m):
    def replace(old, new, count=-1):
        try:
            grow = _len(new) - _len(old)
        except TypeError:
            return m(old, new, count)
        if grow > 0:
            hits = o.count(old) if _len(old) else _len(o) + 1
            if _isinstance(count, int) and count >= 0:
                hits = min(hits, count)
            st.alloc('replace()', _size(o) + hits * grow * (4 if _isinstance(o, str) and not o.isascii() else 1))
        return m(old, new, count)
    return replace


def _alloc_join(st, o, m):
    def join(iterable):
        parts = iterable if _type(iterable) in (list, tuple) else list(iterable)
        total = _size(o) * max(0, _len(parts) - 1)
        for p in parts:
            if _isinstance(p, (str, bytes, bytearray)):
                total += _size(p)
        st.alloc('join()', total)
        return m(parts)
    return join


def _alloc_extend(st, o, m):
    def extend(iterable):
        if _isinstance(iterable, (list, tuple, bytes, bytearray, str)):
            st.alloc('extend()', _size(o) + _size(iterable))
        return m(iterable)
    return extend


_ALLOC_METHODS = {
    'ljust': _alloc_width, 'rjust': _alloc_width, 'center': _alloc_width, 'zfill': _alloc_width,
    'expandtabs': _alloc_expandtabs, 'replace': _alloc_replace, 'join': _alloc_join, 'extend': _alloc_extend,
}


# ---------------------------------------------------------------- the value gate's tables

_GETATTR_NAMES = ('__getattribute__', '__getattr__')
_SETATTR_NAMES = ('__setattr__', '__delattr__')
# The code of functools.singledispatch's register (known once functools is seen).
_SD_REGISTER = [None]
_INPLACE_FUNCS = {
    'iadd': '+=', 'iconcat': '+=', 'isub': '-=', 'imul': '*=', 'imatmul': '@=', 'itruediv': '/=',
    'ifloordiv': '//=', 'imod': '%=', 'ipow': '**=', 'ilshift': '<<=', 'irshift': '>>=', 'ior': '|=',
    'ixor': '^=', 'iand': '&=',
}
_ARITH_FUNCS = {'add': '+', 'concat': '+', 'mul': '*', 'pow': '**', 'lshift': '<<', 'mod': '%'}

_UNPICKLE = 'unpickling resolves module and attribute names from its data to any object (find_class)'
_COPYREG = 'it changes how every object of a type is copied and pickled, process-wide'
_MEMBERS = 'it reads every attribute of an object around the attribute gate (use dir() and getattr())'
_FRAMES = 'it captures frames (frame capture is always refused)'
_CODE_FACTORY = 'it builds code objects or functions from raw parts, around the rewrite and the budgets'
_PROCESS = 'it changes state the whole process relies on (later evaluations, the application, the other threads)'
_CALLS_LATER = ('it registers a function the process calls later, outside the evaluation (a hook, a handler, a '
                'callback of the whole process)')
_MODULE_WRITE = "it binds names in a module's namespace, which the rest of the process relies on"
_REGISTRY = 'it records functions in a registry of its module, which the rest of the process relies on'
# Helpers of g_writes_arg whose second argument is the one they change.
_WRITES_SECOND = frozenset(('struct.pack_into',))

_OPERATOR_SPECS = tuple([('attrgetter', 'g_attrgetter'), ('methodcaller', 'g_methodcaller'), ('setitem', 'g_store'),
                         ('delitem', 'g_store')]
                        + [(f, 'g_inplace') for f in _INPLACE_FUNCS] + [(f, 'g_arith') for f in _ARITH_FUNCS])

# The helpers that resolve attribute names, module names or source text from
# strings, by module: (attribute path, treatment). A treatment 'g_<x>' names the
# _State method returning the guarded form; any other text is the reason the
# helper is refused. Found by identity once their module is loaded (an alias
# such as _operator.attrgetter is the same object). The rest of the family is
# handled where it happens: getattr, hasattr, vars, dir (shims), str.format and
# format_map (template checks), string.Formatter and logging's '{' style
# (patched, see _PATCHES), __getattribute__ and __getattr__ (post), typing's
# string types (patched), annotations (__sb_annot__).
_HELPER_SPECS = {
    'builtins': (('type', 'g_type'),),
    '_operator': _OPERATOR_SPECS,
    'operator': _OPERATOR_SPECS,
    'pickle': tuple((f, _UNPICKLE) for f in ('loads', 'load', 'Unpickler', '_loads', '_load', '_Unpickler')),
    '_pickle': tuple((f, _UNPICKLE) for f in ('loads', 'load', 'Unpickler')),
    'copyreg': tuple((f, _COPYREG) for f in ('pickle', 'constructor', 'add_extension', 'remove_extension',
                                              'clear_extension_cache')),
    'inspect': (('getattr_static', 'g_getattr_static'), ('unwrap', 'g_unwrap'), ('signature', 'g_no_eval_str'),
                ('Signature.from_callable', 'g_no_eval_str'), ('get_annotations', 'g_no_eval_str'),
                ('getmembers', _MEMBERS), ('getmembers_static', _MEMBERS),
                ('getclosurevars', "it reads a function's globals, builtins and closure"))
    + tuple((f, _FRAMES) for f in ('currentframe', 'stack', 'trace', 'getouterframes', 'getinnerframes',
                                    'getframeinfo', 'getargvalues', 'getgeneratorlocals', 'getcoroutinelocals',
                                    'getasyncgenlocals')),
    'dataclasses': (('asdict', 'g_fields'), ('astuple', 'g_fields'), ('replace', 'g_fields'),
                    ('make_dataclass', 'g_make_dataclass'), ('dataclass', 'g_dataclass')),
    'functools': (('total_ordering', 'g_mutator'), ('update_wrapper', 'g_update_wrapper'),
                  ('wraps', 'g_update_wrapper')),
    'abc': (('update_abstractmethods', 'g_mutator'), ('ABCMeta.register', 'g_abc_register'),
            ('abstractmethod', 'g_mutator')),
    'typing': (('final', 'g_mutator'), ('no_type_check', 'g_mutator'), ('runtime_checkable', 'g_mutator'),
               ('overload', _REGISTRY), ('clear_overloads', _REGISTRY)),
    'types': (('FunctionType', _CODE_FACTORY), ('CodeType', _CODE_FACTORY), ('coroutine', 'g_mutator')),
    'enum': (('global_enum', _MODULE_WRITE), ('_simple_enum', _MODULE_WRITE), ('EnumType._convert_', _MODULE_WRITE)),
    'random': (('seed', 'g_rng'), ('setstate', 'g_rng'), ('shuffle', 'g_writes_arg')),
    'heapq': tuple((f, 'g_writes_arg') for f in ('heappush', 'heappop', 'heapify', 'heapreplace', 'heappushpop',
                                                 '_heapify_max', '_heappop_max', '_heapreplace_max')),
    'bisect': tuple((f, 'g_writes_arg') for f in ('insort', 'insort_left', 'insort_right')),
    'struct': (('pack_into', 'g_writes_arg'),),
    'weakref': (('finalize', _CALLS_LATER),),
    'sys': tuple((f, _PROCESS) for f in (
        'setrecursionlimit', 'setswitchinterval', 'set_int_max_str_digits', 'setdlopenflags',
        'set_coroutine_origin_tracking_depth', '_clear_type_cache', '_clear_internal_caches',
        'activate_stack_trampoline', 'deactivate_stack_trampoline'))
    + tuple((f, _CALLS_LATER) for f in ('settrace', 'setprofile', '_settraceallthreads', '_setprofileallthreads',
                                         'set_asyncgen_hooks', 'addaudithook'))
    + tuple(('monitoring.' + f, _CALLS_LATER) for f in ('use_tool_id', 'free_tool_id', 'clear_tool_id',
                                                         'register_callback', 'set_events', 'set_local_events',
                                                         'restart_events')),
    'atexit': tuple((f, _CALLS_LATER) for f in ('register', 'unregister', '_clear', '_run_exitfuncs')),
    'signal': tuple((f, _CALLS_LATER) for f in ('signal', 'setitimer', 'alarm', 'pthread_sigmask', 'set_wakeup_fd',
                                                 'siginterrupt')),
    'threading': tuple((f, _CALLS_LATER) for f in ('settrace', 'setprofile', 'settrace_all_threads',
                                                    'setprofile_all_threads'))
    + (('stack_size', _PROCESS),),
    'warnings': tuple((f, _PROCESS) for f in ('filterwarnings', 'simplefilter', 'resetwarnings', '_filters_mutated',
                                              '_add_filter')),
    'codecs': tuple((f, _CALLS_LATER) for f in ('register', 'unregister', 'register_error')),
    'os': (('putenv', _PROCESS), ('unsetenv', _PROCESS), ('chdir', _PROCESS), ('fchdir', _PROCESS),
           ('umask', _PROCESS), ('register_at_fork', _CALLS_LATER), ('readv', 'g_writes_buffers'),
           ('preadv', 'g_writes_buffers')),
    'locale': (('setlocale', _PROCESS),),
    'socket': (('setdefaulttimeout', _PROCESS),),
    'decimal': (('setcontext', _PROCESS),),
    'faulthandler': tuple((f, _PROCESS) for f in ('enable', 'disable', 'register', 'unregister',
                                                  'dump_traceback_later', 'cancel_dump_traceback_later')),
    'tracemalloc': tuple((f, _PROCESS) for f in ('start', 'stop', 'clear_traces')),
    'site': tuple((f, _PROCESS) for f in ('addsitedir', 'addpackage', 'main')),
    'mimetypes': (('add_type', _PROCESS), ('init', _PROCESS)),
    'shutil': tuple((f, _PROCESS) for f in ('register_archive_format', 'unregister_archive_format',
                                            'register_unpack_format', 'unregister_unpack_format')),
    'webbrowser': (('register', _PROCESS),),
    'csv': tuple((f, _PROCESS) for f in ('register_dialect', 'unregister_dialect', 'field_size_limit')),
    'sqlite3': tuple((f, _CALLS_LATER) for f in ('register_adapter', 'register_converter',
                                                  'enable_callback_tracebacks')),
    'asyncio': (('set_event_loop_policy', _PROCESS), ('set_event_loop', _PROCESS)),
    'logging': tuple((f, _PROCESS) for f in ('basicConfig', 'disable', 'setLoggerClass', 'setLogRecordFactory',
                                             'addLevelName', 'captureWarnings', 'shutdown')),
    'pkgutil': (('resolve_name', 'it resolves a dotted name from a string to any object'),),
    'importlib': (('reload', "it runs a module's code again, in place"),),
}

_HELPERS = {}       # id(helper) -> (helper, treatment, qualified name)
_HELPER_NAMES = {}  # (__module__, __qualname__) of a helper -> (treatment, qualified name)
_SIGHTED = {}       # id(module) -> module: the module objects whose helpers and patches are in place
_SEEN = [-1]        # len(sys.modules) at the last complete refresh


def _module_name(m):
    try:
        n = _MOD_DICT(m).get('__name__')
    except (TypeError, AttributeError):
        return None
    return n if _type(n) is str else None


def _names_of(o):
    """(__module__, __qualname__) of a function or a class, else None: a helper
    made again (its module imported anew) keeps them."""
    try:
        mod = _getattr(o, '__module__', None)
        qn = _getattr(o, '__qualname__', None)
    except Exception:
        return None
    if _type(mod) is str and _type(qn) is str:
        return (mod, qn)
    return None


def _sight(m, name):
    """Register the helpers and install the patches of the watched module m (a
    module object seen for the first time: a module imported anew is another
    object)."""
    _SIGHTED[id(m)] = m
    for path, how in _HELPER_SPECS.get(name, ()):
        o = m
        for part in path.split('.'):
            o = _getattr(o, part, None)
            if o is None:
                break
        if o is None:
            continue
        if _type(o) is _METHOD:
            o = o.__func__  # a classmethod: known by its function
        q = name + '.' + path
        _HELPERS[id(o)] = (o, how, q)
        k = _names_of(o)
        if k is not None:
            _HELPER_NAMES[k] = (how, q)
    if name == 'functools' and _SD_REGISTER[0] is None:
        try:
            _SD_REGISTER[0] = _FN_CODE(m.singledispatch(_sight).register)
        except Exception:
            pass
    patch = _PATCHES.get(name)
    if patch is not None:
        patch(m)
    carried = [C for mod, cls in _CARRIED if mod == name for C in (_MOD_DICT(m).get(cls),) if _isinstance(C, type)]
    if carried:
        _CARRIED_CLASSES[0] = _CARRIED_CLASSES[0] + tuple(C for C in carried if C not in _CARRIED_CLASSES[0])


def _refresh():
    """Register the helpers and install the patches of every watched module
    loaded since the last call. Cheap when sys.modules has not grown; it runs
    before evaluated code can fetch anything from a newly loaded module (an
    attribute read, an import, the value gate), so a patch holds from the first
    call; the module gate does the same for a module it sees for the first time."""
    mods = sys.modules
    n = _len(mods)
    if n == _SEEN[0]:
        return
    complete = True
    for name in _WATCHED:
        m = mods.get(name)
        if m is None or id(m) in _SIGHTED:
            continue
        try:
            d = _MOD_DICT(m)
        except TypeError:
            continue
        if _getattr(d.get('__spec__'), '_initializing', False):
            complete = False  # being imported (by another thread): next time
            continue
        _sight(m, name)
    if complete:
        _SEEN[0] = n


def _annot_has_string(v, depth):
    """True when the annotation v holds a string type (a str, a ForwardRef, or
    one inside a generic alias or a union) that typing would evaluate."""
    t = _type(v)
    if t is str or _isinstance(v, str):
        return True
    if t in _PLAIN or depth > 10:
        return False
    if t.__name__ == 'ForwardRef':
        return True
    if _getattr(t, '__module__', None) not in ('typing', 'types', 'typing_extensions'):
        return False
    origin = _getattr(v, '__origin__', None)
    if _getattr(origin, '_name', None) == 'Literal':
        return False
    args = _getattr(v, '__args__', None)
    if _type(args) is tuple:
        for a in args:
            if _annot_has_string(a, depth + 1):
                return True
    return False


class _FromList:
    """What a from-import receives from the guarded __import__: the names taken,
    each one gated (CPython's import reads them as attributes)."""


# ---------------------------------------------------------------- the class gate's tables

_HEAPTYPE = 1 << 9
_SEEN_MAX = 1 << 16       # values a state records as held by the code (beyond: it held everything)
_STATIC_TYPES = set()     # classes built into the interpreter or an extension (nothing can define on them)
_STATIC_VALUES = set()    # those of them whose instances are not classes
_TYPE_SUBCLASS = 1 << 31  # Py_TPFLAGS_TYPE_SUBCLASS
_FN_CODE = _FUNCTION.__dict__['__code__'].__get__
_FN_GLOBALS = _FUNCTION.__dict__['__globals__'].__get__
_FN_NAME = _FUNCTION.__dict__['__name__'].__get__
_FN_MODULE = _FUNCTION.__dict__['__module__'].__get__
_GUARD_GLOBALS = globals()
_EVAL_CODES = {}          # id -> weak reference: the code objects the guard compiled (see _note_code)
_METHOD_DESCRIPTOR = type(str.upper)
_WRAPPER_DESCRIPTOR = type(object.__init__)
_CLASSMETHOD_DESCRIPTOR = type(dict.__dict__['fromkeys'])
_GETSET = type(_FUNCTION.__dict__['__code__'])
_MEMBER = type(type.__dict__['__weakrefoffset__'])
_GENERIC_ALIAS = type(list[int])
# Dunders that hold data about a class rather than behaviour the interpreter
# or a protocol calls: any value passes, unless it involves evaluated code (a
# descriptor built on one of its functions would run it when read).
_META_DUNDERS = frozenset((
    '__doc__', '__module__', '__qualname__', '__name__', '__annotations__', '__slots__', '__match_args__',
    '__dict__', '__weakref__', '__orig_bases__', '__parameters__', '__type_params__', '__firstlineno__',
    '__static_attributes__', '__abstractmethods__', '__dataclass_fields__', '__dataclass_params__', '__total__',
    '__required_keys__', '__optional_keys__', '__readonly_keys__', '__mutable_keys__', '__signature__',
    '__wrapped__', '__final__', '__protocol_attrs__', '__non_callable_proto_members__', '__orig_class__',
    '__text_signature__', '__classcell__'))
_INERT = {}               # type -> True when its instances are neither callable nor descriptors


def _inert(t):
    r = _INERT.get(t)
    if r is None:
        r = True
        for B in _TYPE_MRO(t):
            d = _TYPE_DICT(B)
            if '__call__' in d or '__get__' in d or '__set__' in d or '__delete__' in d:
                r = False
                break
        if _len(_INERT) >= 4096:
            _INERT.clear()
        _INERT[t] = r
    return r


def _eval_function(f):
    """True for a function evaluated code defined (its code was compiled by the
    guard) or one of the guard's own wrappers."""
    try:
        c = _FN_CODE(f)
        r = _EVAL_CODES.get(id(c))
        return (r is not None and r() is c) or _FN_GLOBALS(f) is _GUARD_GLOBALS
    except TypeError:
        return True


def _library_name(f):
    """The name of f when it is the library's own code (a function compiled
    from a file or by a library, a built-in function of a module or a class, a
    method descriptor), else None (evaluated code's function, a method bound to
    an instance, any other object)."""
    t = _type(f)
    if t is _FUNCTION:
        return None if _eval_function(f) else _FN_NAME(f)
    if t is _BUILTIN_METHOD:
        s = f.__self__
        if s is None or _type(s) is _MODULE or _isinstance(s, type):
            return f.__name__
        return None
    if t is _METHOD_DESCRIPTOR or t is _WRAPPER_DESCRIPTOR or t is _CLASSMETHOD_DESCRIPTOR:
        return f.__name__
    return None


def _involves_eval(v, depth=0):
    """True when v is, or wraps, something of evaluated code (its function,
    the guard's helper, a method bound to an instance) as far as the standard
    wrappers show (staticmethod, classmethod, property, partial, __wrapped__)."""
    if depth > 8:
        return True
    t = _type(v)
    if t is _FUNCTION:
        if _eval_function(v):
            return True
        w = _getattr(v, '__dict__', {}).get('__wrapped__')
        return w is not None and _involves_eval(w, depth + 1)
    if t is _METHOD:
        return True
    if t is _BUILTIN_METHOD:
        s = v.__self__
        return not (s is None or _type(s) is _MODULE or _isinstance(s, type))
    if t is staticmethod or t is classmethod:
        return _involves_eval(v.__func__, depth + 1)
    if t is property:
        return any(x is not None and _involves_eval(x, depth + 1) for x in (v.fget, v.fset, v.fdel))
    if _inert(t) or t is _METHOD_DESCRIPTOR or t is _WRAPPER_DESCRIPTOR or t is _CLASSMETHOD_DESCRIPTOR \
            or t is _GETSET or t is _MEMBER:
        return False
    if t is _functools.partial:
        return _involves_eval(v.func, depth + 1)
    return False


def _defines(k, v, mro, chose):
    """True when the dunder k of a class (its own __dict__ holds v, mro is its
    __mro__) is behaviour the code chose rather than the library's own
    implementation of that special method. The code's: a function of
    evaluated code or anything wrapping one (a lambda, a partial, a
    staticmethod, a property), a method bound to an object, and any object
    the code held (chose(v): it passed the value gate, it is a builtin of
    eval-call, the application supplied it). The library's: the object a base
    class holds under k (or under the name of the function, an alias), a
    function or built-in of the library named k, what the factory made itself
    and the code never held (namedtuple's and attrs' methods, a dataclass's
    __replace__), data (neither callable nor a descriptor), the descriptors
    type() makes for __dict__ and __weakref__. For the metadata dunders
    (_META_DUNDERS) only evaluated code counts."""
    t = _type(v)
    if k in _META_DUNDERS:
        return _involves_eval(v)
    if _inert(t):
        return False
    if t is _GETSET or t is _MEMBER:
        # Made by type(): for __dict__ and __weakref__, or for a slot named in
        # __slots__ (a dunder slot is the code's choice).
        return k not in ('__dict__', '__weakref__')
    for B in mro[1:]:
        if _TYPE_DICT(B).get(k) is v:
            return False
    f = v.__func__ if (t is staticmethod or t is classmethod) else v
    if k == '__class_getitem__' and f is _GENERIC_ALIAS:
        return False
    if _involves_eval(v):
        return True
    name = _library_name(f)
    if name is not None:
        if name == k:
            return False
        if _is_dunder(name):
            for B in mro[1:]:
                if _TYPE_DICT(B).get(name) is f:
                    return False
    return chose(v) or chose(f)


def _registered(C):
    """True when the class C is the one its module holds under its qualified
    name (a class a module defines: evaluated code cannot bind names in a
    module, nor in sys.modules)."""
    try:
        qn = _TYPE_QUALNAME(C)
    except (TypeError, AttributeError):
        return False
    return _held_by_module(C, _TYPE_DICT(C).get('__module__'), qn)


def _held_by_module(C, mod, qn):
    """True when the module mod holds C under the qualified name qn."""
    if _type(mod) is not str or _type(qn) is not str or '<' in qn:
        return False
    m = sys.modules.get(mod)
    if m is None or not _isinstance(m, _MODULE):
        return False
    try:
        o = _MOD_DICT(m)
    except TypeError:
        return False
    if '__sb_tick__' in o:
        return False  # an evaluation's namespace (the caller's globals, used in place)
    parts = qn.split('.')
    x = o.get(parts[0])
    for p in parts[1:]:
        if not _isinstance(x, type):
            return False
        x = _TYPE_DICT(x).get(p)
    return x is C


# ---------------------------------------------------------------- process-wide patches

def _patch_formatter(F):
    """string.Formatter checks, while an evaluation runs (see _state_here),
    every field get_field resolves (its attribute components pass the attribute
    gate) and every spec format_field applies (charged to eval-max-alloc).
    Process-wide, once. Returns True when the class was patched already."""
    cur = F.__dict__.get('get_field')
    if cur is None or _getattr(cur, '_sb_guarded', False):
        return True
    orig = cur

    def get_field(self, field_name, args, kwargs):
        st = _state_here()
        if st is not None:
            first, rest = _string.formatter_field_name_split(field_name)
            for is_attr, n in rest:
                if is_attr:
                    st.gate(n, 'format')
        return orig(self, field_name, args, kwargs)
    get_field._sb_guarded = True
    get_field.__doc__ = orig.__doc__
    ff = F.__dict__.get('format_field')
    if ff is not None:
        def format_field(self, value, format_spec):
            st = _state_here()
            if st is not None and _type(format_spec) is str and format_spec:
                st.alloc('a format spec', _spec_size(format_spec))
            return ff(self, value, format_spec)
        format_field.__doc__ = ff.__doc__
        F.format_field = format_field
    F.get_field = get_field
    return False


def _patch_string(m):
    F = _MOD_DICT(m).get('Formatter')
    if _isinstance(F, type):
        _patch_formatter(F)


def _patch_logging(m):
    """logging's '{' style formats records with str.format: while an
    evaluation runs (see _state_here) its template is checked field by field
    when the style is built and when it formats (a formatter built elsewhere,
    on a thread of the application, is checked when the evaluation uses it)."""
    S = _MOD_DICT(m).get('StrFormatStyle')
    if not _isinstance(S, type) or _getattr(S.__dict__.get('__init__'), '_sb_guarded', False):
        return
    orig = S.__init__

    def __init__(self, *a, **k):
        orig(self, *a, **k)
        st = _state_here()
        if st is not None and not st.importing:
            st.check_template(self._fmt)
    __init__._sb_guarded = True
    S.__init__ = __init__
    fmt = S.__dict__.get('_format')
    if fmt is not None:
        def _format(self, record):
            st = _state_here()
            if st is not None and not st.importing:
                st.check_template(self._fmt)
            return fmt(self, record)
        S._format = _format


def _patch_typing(m):
    """A string type (typing.ForwardRef, made from a str by List['x'] and the
    like) is evaluated later by typing with the raw eval: none may be made while
    an evaluation runs (see _state_here; imports it asks for aside)."""
    FR = _MOD_DICT(m).get('ForwardRef')
    if not _isinstance(FR, type) or _getattr(FR.__dict__.get('__init__'), '_sb_guarded', False):
        return
    orig = FR.__init__

    def __init__(self, *a, **k):
        st = _state_here()
        if st is not None and not st.importing:
            raise st.denied('typing.ForwardRef', '', 'helper', "a string type (typing.ForwardRef) is denied by the "
                            "eval guard: typing evaluates it with the raw eval, outside the guard (no eval- rule "
                            "grants it): write the type itself.")
        orig(self, *a, **k)
    __init__._sb_guarded = True
    FR.__init__ = __init__


# The classes whose methods carry the evaluation (see _State.post_value), and
# those of the modules seen so far.
_CARRIED = (('string', 'Formatter'), ('logging', 'Formatter'), ('logging', 'PercentStyle'))
_CARRIED_CLASSES = [()]
_PATCHES = {'string': _patch_string, 'logging': _patch_logging, 'typing': _patch_typing,
            'annotationlib': _patch_typing}
_WATCHED = tuple(sorted(set(_HELPER_SPECS) | set(_PATCHES)))
_WATCHED_SET = frozenset(_WATCHED)


def _make_user_import():
    # A trampoline whose frame belongs to evaluated code (its file name starts
    # with <eval:): inside a sandboxed interpreter the Python layer's import
    # rules judge every import evaluated code makes, as for any user code.
    g = {'__builtins__': {}, '_imp': _RAW['__import__']}
    _exec(_compile('def imp(name, globals=None, locals=None, fromlist=(), level=0):\n'
                   '    return _imp(name, globals, locals, fromlist, level)\n', '<eval:import>', 'exec', 0, True), g)
    return g['imp']


_user_import = _make_user_import()


# ---------------------------------------------------------------- entry points

class Engine:
    """The eval guard of one interpreter: the profiles it knows, the code objects
    it produced, and where refusals are reported (report(exc) is called for
    every Rejected, Denied and Interrupted, before it is raised)."""

    def __init__(self, profiles=None, report=None):
        self.profiles = {}
        for name, d in (profiles or {}).items():
            self.profiles[name] = compile_profile(d)
        self.report = report
        self._produced = {}

    # -- code objects

    def _register(self, code, P, writable):
        if _len(self._produced) >= 4096:
            self._produced.pop(next(iter(self._produced)))
        self._produced[id(code)] = (code, P, writable)

    def _code_for(self, P, source, mode):
        """The rewritten code of source for P: a str/bytes source is checked, a
        code object must have been produced by this guard."""
        if _type(source) is _CODE:
            e = self._produced.get(id(source))
            if e is None or e[0] is not source:
                raise self._deny(Denied("this code object is refused: the eval guard did not produce it (compile "
                                        "it with the guarded compile())", '<code>', 'eval-syntax', 'code'))
            return e[0], e[2]
        source = _text(source)
        filename = P.source_ref
        try:
            return _prepare(P, source, mode, filename)
        except Rejected as e:
            raise self._deny(e)

    def _deny(self, e):
        if self.report is not None:
            try:
                self.report(e)
            except Exception:
                pass
        return e

    def _compile(self, P, source, mode, flags=0):
        if mode not in ('eval', 'exec', 'single'):
            raise ValueError("compile() mode must be 'exec', 'eval' or 'single'")
        if _isinstance(source, _AST):
            tree = _copy(source)
            vs = _validate(tree, P, _Source(None))
            if vs:
                raise self._deny(Rejected(vs, P.source_ref))
            if flags & _ONLY_AST:
                return source
            try:
                code, writable = _prepare(P, None, mode, P.source_ref, tree)
            except Rejected as e:
                raise self._deny(e)
        else:
            source = _text(source)
            if flags & _ONLY_AST:
                tree, vs = _parse(source, P, mode, P.source_ref)
                if vs:
                    raise self._deny(Rejected(vs, P.source_ref, source))
                return tree
            code, writable = self._code_for(P, source, mode)
        self._register(code, P, writable)
        return code

    # -- the patched builtins of a sandboxed interpreter (default profile)

    def default(self):
        P = self.profiles.get('')
        if P is None:
            raise RuntimeError('eval guard: no default eval profile')
        return P

    def builtin_eval(self, source, globals=None, locals=None):
        return self._builtin('eval', source, globals, locals)

    def builtin_exec(self, source, globals=None, locals=None, closure=None):
        if closure is not None:
            raise TypeError('exec() closure is not accepted by the eval guard')
        self._builtin('exec', source, globals, locals)

    def builtin_compile(self, source, filename, mode, flags=0, dont_inherit=False, optimize=-1):
        return self._compile(self.default(), source, mode, flags)

    def _builtin(self, mode, source, g, l):
        P = self.default()
        if _type(source) is not _CODE and not _isinstance(source, (str, bytes, bytearray)):
            raise TypeError('%s() arg 1 must be a string, bytes or code object' % mode)
        if g is not None and _type(g) is not dict:
            raise TypeError('globals must be a dict')
        code, writable = self._code_for(P, source, mode)
        st = _State(P, self)
        if g is not None and P.namespace == 'adaptive':
            ns = st.inplace(g)
        else:
            ns = st.namespace()
            l = None
        return st.execute(code, ns, l, mode, writable)

    # -- pysandboxes.guarded_eval

    def guarded_eval(self, source, profile='', names=None, mode='eval'):
        """Run source under a declared profile ('' is the default one) in a new
        namespace holding names. Returns the value (eval) or the names the code
        bound (exec)."""
        P = self.profiles.get(profile)
        if P is None:
            known = ', '.join(repr(n or 'default') for n in sorted(self.profiles)) or 'none'
            raise ValueError('unknown eval profile %r; declared profiles: %s' % (profile, known))
        return _run(P, source, names, mode, P.source_ref, self)


_LOCAL_ENGINE = Engine()


def _text(source):
    if _isinstance(source, (bytes, bytearray)):
        return bytes(source).decode('utf-8', 'replace')
    if _type(source) is not str:
        if _isinstance(source, str):
            return str.__str__(source)
        raise TypeError('the source must be a str, bytes or code object, not %s' % _type(source).__name__)
    return source


def run(src, names=None, profile=None, mode='eval', filename='<eval>'):
    """Check src against profile (raise Rejected on any violation), rewrite it,
    run it in a new namespace and return the value (mode 'eval') or, for mode
    'exec', a dict of the names the code bound: every name of the final
    namespace that is new or now bound to another object than before the run,
    except the guard's helpers (__sb_*) and __builtins__.

    The namespace holds __builtins__ built from eval-call (with guarded shims),
    the helpers, and names (the caller's data: evaluated code writes only into
    what it made, never into names or what they hold, by any route; a module it
    holds may be used as given, a class it holds is trusted). Under
    eval-namespace=closed names may not hold __builtins__; under adaptive a
    __builtins__ in names is honoured as given; under caller the source runs with
    the raw builtins, unchecked and without budgets (debugging only).
    Budget exhaustion raises Interrupted; runtime refusals raise Denied."""
    if mode not in ('eval', 'exec'):
        raise ValueError("eval guard: mode must be 'eval' or 'exec', not %r" % (mode,))
    P = compile_profile(profile if profile is not None else {})
    return _run(P, src, names, mode, filename, None)


def ready(profile=None):
    """Make the state of one evaluation under profile now, before its source is
    known, and return run1(src, names=None, mode='eval', filename='<eval>'),
    which runs it as run does, once. For a process that waits for its one
    evaluation (the eval layer's zygote forks them): what does not depend on
    the source (the state, its helpers, the builtins and their shims) is built
    while it waits; the budgets start when run1 is called. Nothing else is
    kept: run1 checks, rewrites and compiles the source as run does."""
    P = compile_profile(profile if profile is not None else {})
    if P.namespace == 'caller':
        st = None
    else:
        st = _State(P, None)
        st.builtins()
    used = []

    def run1(src, names=None, mode='eval', filename='<eval>'):
        if used:
            raise RuntimeError('eval guard: a state made by ready() serves one evaluation')
        used.append(True)
        if mode not in ('eval', 'exec'):
            raise ValueError("eval guard: mode must be 'eval' or 'exec', not %r" % (mode,))
        if st is not None:
            st.rearm()  # its budgets count from now
        return _run(P, src, names, mode, filename, None, st)
    return run1


def _run(P, src, names, mode, filename, engine, st=None):
    if P.namespace == 'caller':
        ns = dict(names or {})
        before = dict(ns)
        code = _compile(_text(src), filename, mode, 0, True)
        if mode == 'eval':
            return _eval(code, ns)
        _exec(code, ns)
        return _bound(ns, before)
    if st is None:
        st = _State(P, engine)
    try:
        code, writable = _prepare(P, _text(src), mode, filename)
    except Rejected as e:
        st.report(e)
        raise
    ns = st.namespace(names)
    before = dict(ns)
    r = st.execute(code, ns, None, mode, writable)
    if mode == 'eval':
        return r
    return _bound(ns, before)


def _bound(ns, before):
    out = {}
    for k, v in ns.items():
        if k == '__builtins__' or (_type(k) is str and k.startswith(_RESERVED)):
            continue
        if k not in before or before[k] is not v:
            out[k] = v
    return out


# ---------------------------------------------------------------- plain data out

# to_json(o), the JSON text of plain data, follows the module's end: the
# embedding (evalguard.Source) appends the encoder the Python layer shares
# (package internal/pyjson).


class _ProbeList(list):
    """A container with attributes, for _calibrate."""


def _calibrate():
    """Check, on this interpreter, the reference counts the write rule relies on
    (see _State.sight): a value just made is the evaluation's, one something
    else holds is not; an item only a made container holds is, one held
    elsewhere is not. Any surprise turns the inference off (_RC_OK false: only
    displays and comprehensions are the evaluation's own)."""
    global _RC_OK
    ok = False
    try:
        st = _State(compile_profile({'attribute': {'allow': ['x', 'y']}}))
        made = st.made
        st.ret(list())
        fresh = [x for x in made.values()]
        kept = []
        st.ret(kept)
        c = st.own_new([[1]])
        st.own_new(kept)
        st.item(c, 0)
        inner = c[0]
        held = [2]
        c2 = st.own_new([held])
        st.item(c2, 0)
        deep = st.ret([[3], held])
        c3 = st.own_new([[4]])
        for _ in st.iter(c3):
            pass
        prod = st.binop('*', [5], 2)
        holder = st.own_new(_ProbeList())
        holder.x = [6]
        attr = st.getattr(holder, 'x')
        holder.y = held
        st.getattr(holder, 'y')
        ok = (_len(fresh) == 1 and made.get(id(kept)) is None and made.get(id(c)) is c
              and made.get(id(inner)) is inner
              and made.get(id(held)) is None and made.get(id(deep[0])) is deep[0]
              and made.get(id(c3[0])) is c3[0] and made.get(id(prod)) is prod and made.get(id(holder)) is holder
              and made.get(id(attr)) is attr and made.get(id(held)) is None)
        n = _len(made)
        del fresh
        st.sweep()
        ok = ok and _len(st.made) == n - 1
    except Exception:
        ok = False
    _RC_OK = ok
    if not ok:
        # Nothing is marked from a reference count: only displays and
        # comprehensions are the evaluation's (fail closed).
        _State.sight = lambda self, v, held: None
        _State.take = lambda self, v: None


# The functions of the helpers bound into every namespace (__sb_*).
_HELPER_FUNCS = {f.__func__: k for k, f in _State(Profile({})).helpers.items() if _type(f) is _METHOD}
_calibrate()
