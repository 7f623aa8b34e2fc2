# Arming the guard: the state tuple S, the audit hook, and the few patches for
# what no audit event covers (functions without an event, pinned DNS answers,
# filtered listings, os.open's dir_fd, eval/exec/compile, os.environ in learning
# mode). Runs in the child before any user code. The patches are conveniences
# that give precise names and behaviour; the audit hook is the enforcement (a
# patch can be undone by the program, the hook cannot).

import sys
import posix
import builtins as _builtins
import os  # noqa: F401  (not imported at start under -S)


def _ip_tuple(guard, text):
    ip = guard['_parse_ip'](text)
    return (ip[0], ip[1], text)


def build(G, cfg, fd, sb):
    """Build the state tuple and the hook. G is the guard module's namespace, sb
    the pysandboxes module (its exception classes)."""
    MPT = G['_MPT']
    FUNC = G['_FUNC']
    METHOD = G['_METHOD']
    learning = cfg['mode'] == 'learn'

    def prefix(p):
        return '/' if p == '/' else p.rstrip('/') + '/'

    exposes = tuple((e[0], prefix(e[0]), bool(e[1]), e[2], e[3]) for e in cfg['exposes'])
    implicit = tuple((m[0], prefix(m[0]), bool(m[1]), m[2]) for m in cfg['implicit'])
    ignores = tuple((i[0], bool(i[1]), i[2], i[3]) for i in cfg['ignores'])
    rules = []
    for allow, protos, dirs, prefixes, ports, raw, ref, named in cfg['net']:
        pf = []
        for addr, bits in prefixes:
            ip = G['_parse_ip'](addr)
            if ip is None:
                continue
            pf.append((ip[0], ip[1], bits))
        rules.append((bool(allow), protos, dirs, tuple(pf), tuple((lo, hi) for lo, hi in ports), raw, ref, bool(named)))
    pins = MPT({h: tuple(_ip_tuple(G, a) for a in addrs) for h, addrs in cfg['pins'].items()})
    imp = cfg['imports']
    imports_all = tuple(imp['all']) if imp['all'] is not None else None
    imports = MPT({k: tuple(v) for k, v in imp['modules'].items()})
    api = MPT({k: tuple(v) for k, v in cfg['api'].items()})
    doors = MPT(dict(G['FRAME_DOORS']))
    stdlib = tuple(d.rstrip('/') + '/' for d in cfg['stdlib'])
    classes = (sb.RuleFileNotFoundError, sb.RulePermissionError, sb.RuleSocketConnectionRefusedError,
               sb.RuleModuleNotFoundError, sb.RuleApiPermissionError)

    # The layer's own code objects (every function of its modules, nested ones too).
    ours = set()

    def collect(code):
        if code in ours:
            return
        ours.add(code)
        for c in code.co_consts:
            if type(c) is type(code):
                collect(c)
    for ns in (G, ARM, sb.__dict__):
        for v in list(ns.values()):
            if type(v) is FUNC:
                collect(v.__code__)
            elif type(v) is type:
                for a in v.__dict__.values():
                    if type(a) is FUNC:
                        collect(a.__code__)
    for c in EXTRA_CODES:
        collect(c)

    s = G['_send']
    d = list(s.__defaults__)
    d[0] = fd
    send = FUNC(s.__code__, G, '_send', tuple(d))
    collect(send.__code__)

    own = set()
    for ns in (G, ARM):
        for v in ns.values():
            if type(v) is FUNC or (type(v) is type and v.__module__ != 'builtins'):
                own.add(v)
    for name in dir(sb):
        v = getattr(sb, name)
        if type(v) is type:
            own.add(v)
    own.add(send)

    # The pids whose calls the API guard lets through: the eval zygote's (it forks,
    # limits and kills the evaluations' processes), and an evaluation's own
    # while it sets its limits, before it evaluates anything.
    zygote = {posix.getpid()} if cfg['target']['kind'] == 'zygote' else None
    S = (learning, exposes, implicit, ignores, tuple(rules), pins, imports_all, imports, api, doors, stdlib,
         frozenset(id(c) for c in ours), send, classes, zygote, MPT(dict(G['API_EVENTS'])), None,
         frozenset(id(o) for o in own), set(), set(), _import_state(cfg, exposes), tuple(ours))
    handlers = MPT(dict(G['HANDLERS']))
    h = G['_hook']
    cache = {}
    hook_fn = FUNC(h.__code__, G, '_hook', (handlers.get, cache) + h.__defaults__[2:])
    hook = METHOD(hook_fn, S)
    gate = METHOD(G['_gate'], S)
    return S, hook, gate, S[11], cache


# Modules always importable: the layer's own, the interpreter itself (sys,
# builtins) and the program's own __main__.
ALWAYS = frozenset(('pysandboxes', 'sys', 'builtins', '__main__'))

# What the interpreter's C code imports for itself, lazily, while it runs a
# function the program called (time.strptime, a codec lookup, copy and pickle's
# reduce protocol, io.open_code...): allowed when the program did not name them.
C_IMPORTS = frozenset(('_strptime', 'encodings', 'copyreg', '_compat_pickle', '_io', 'io', 'time', 'warnings',
                       'linecache', 'traceback', 'codecs', 'locale', '_locale', 'unicodedata', '_weakrefset'))


def _import_state(cfg, exposes):
    """S[20]: what the import judge needs (see guard.py, imports)."""
    import _frozen_importlib as B
    import _frozen_importlib_external as BE

    def slash(p):
        return p.rstrip('/') + '/'
    roots = set()
    for d in tuple(cfg['stdlib']) + tuple(cfg.get('library') or ()):
        roots.add(slash(d))
    for d in cfg['stdlib']:
        roots.add(slash(d) + 'lib-dynload/')
    for d in cfg['site']:
        roots.add(slash(d))
    for d in tuple(cfg.get('library') or ()):
        if d.endswith('/lib/python%d.%d' % sys.version_info[:2]):
            roots.add(slash(d) + 'lib-dynload/')
    # Other site-packages directories on sys.path (a virtual environment given as
    # a path), unless the program may write there.
    for d in sys.path:
        if type(d) is str and d.startswith('/') and (d.endswith('/site-packages') or d.endswith('/dist-packages')):
            p = slash(d)
            if not any(e[2] and (p == e[1] or p.startswith(e[1])) for e in exposes):
                roots.add(p)
    roots = tuple(sorted(roots, key=len, reverse=True))
    protected = ('<frozen ', '<pysandboxes/')
    enc = sys.getfilesystemencoding()
    pbytes = tuple(sorted({r.encode(enc, 'surrogateescape') for r in roots} | {p.encode() for p in protected},
                          key=len))
    ops = cfg.get('opcodes') or {}
    genuine = (BE._compile_bytecode.__code__,
               frozenset((BE.SourceLoader.get_code.__code__, BE.SourcelessFileLoader.get_code.__code__)),
               frozenset((BE.SourceFileLoader, BE.SourcelessFileLoader)))
    return (ops.get('IMPORT_NAME', -1), ops.get('EXTENDED_ARG', -1), C_IMPORTS, roots, ALWAYS, sys.modules,
            protected, genuine, pbytes, None, B.ModuleSpec)


# ---------------------------------------------------------------- sealed wrappers
#
# A function of the layer that calls an original (a function without an audit
# event, the import functions...) must not hand that original to the program: a
# closure cell, a default or an attribute can be read. A sealed function holds
# its state in its code's constants (the template's '@sealed' constant is
# replaced by a tuple): reading __code__ of the layer's functions is refused,
# and no argument can replace it. Its code and the function are registered as
# the layer's own.

_SEALED_GLOBALS = {'__name__': 'pysandboxes', '__builtins__': _builtins}


def _t_gate(*a, **k):
    c = '@sealed'
    c[1](c[2])
    return c[0](*a, **k)


def _t_import(name, globals=None, locals=None, fromlist=(), level=0):
    c = '@sealed'
    return c[0](c[1], c[2], c[3], name, globals, locals, fromlist, level)


def _t_import_module(name, package=None):
    c = '@sealed'
    return c[0](c[1], c[2], name, package)


def _t_imp1(spec):
    c = '@sealed'
    return c[0](c[1], c[2], c[3], spec)


def _t_imp_rest(spec, *rest):
    c = '@sealed'
    return c[0](c[1], c[2], c[3], spec, *rest)


def _t_frozen(name, *rest):
    c = '@sealed'
    return c[0](c[1], c[2], name, *rest)


def _t_fixname(code, path):
    c = '@sealed'
    return c[0](c[1], c[2], code, path)


def _t_path(*a, **k):
    c = '@sealed'
    return c[0](c[1], c[2], c[3], c[4], a, k)


def _t_call(*a, **k):
    c = '@sealed'
    return c[0](c[1], c[2], c[3], a, k)


def _t_patch(name, module):
    c = '@sealed'
    return c[0](c[1], name, module)


def _seal(tmpl, state, reg, like=None):
    """tmpl's code with '@sealed' bound to state, as a new function of the
    layer; named as like (an original it wraps) when given."""
    c = tmpl.__code__
    code = c.replace(co_consts=tuple(state if type(x) is str and x == '@sealed' else x for x in c.co_consts))
    reg(0, code)
    fn = type(tmpl)(code, _SEALED_GLOBALS, tmpl.__name__, tmpl.__defaults__)
    if like is not None:
        for attr in ('__name__', '__qualname__', '__doc__', '__module__'):
            try:
                setattr(fn, attr, getattr(like, attr))
            except (AttributeError, TypeError):
                pass
    reg(1, fn)
    return fn


def _wrap(orig, qual, gate, reg):
    return _seal(_t_gate, (orig, gate, qual), reg, orig)


def _wrapper(orig, qual, gate, done, reg):
    """The wrapper of orig, made once (done maps an original and its wrapper to
    the wrapper: a wrapper is never wrapped again)."""
    w = done.get(orig)
    if w is None:
        w = _wrap(orig, qual, gate, reg)
        done[orig] = w
        done[w] = w
    return w


def patch_module(mod, table, gate, done, reg):
    for attr, qual in table.items():
        orig = getattr(mod, attr, None)
        if orig is None:
            continue
        w = _wrapper(orig, qual, gate, done, reg)
        if w is not orig:
            setattr(mod, attr, w)


def _patch_methods(module, table, gate, done, reg):
    for (cls, attr), qual in table.items():
        c = getattr(module, cls, None)
        orig = c.__dict__.get(attr) if type(c) is type else None
        if orig is None:
            continue
        w = _wrapper(orig, qual, gate, done, reg)
        if w is not orig:
            setattr(c, attr, w)


def _after(st, name, module):
    """What is done to a module of that name when it is made or imported (st:
    the patch tables, the gate, the wrappers made, the registry, the extra
    patches)."""
    tables, gate, done, reg, extra = st
    t = tables.get(name)
    if t is not None:
        patch_module(module, t, gate, done, reg)
    x = extra.get(name)
    if x is not None:
        x(module)


class _Loader:
    """Runs the real loader, then patches the module."""

    def __init__(self, real, patch, name):
        self._real = real
        self._patch = patch
        self._name = name

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        self._patch(self._name, module)


class _Finder:
    """First on sys.meta_path: patches the few modules whose functions have no
    audit event, or whose behaviour changes, when they are imported."""

    def __init__(self, names, patch):
        self._names = names
        self._patch = patch

    def find_spec(self, name, path=None, target=None):
        if name not in self._names:
            return None
        for f in sys.meta_path:
            if f is self:
                continue
            fs = getattr(f, 'find_spec', None)
            if fs is None:
                continue
            spec = fs(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        spec.loader = _Loader(spec.loader, self._patch, name)
        return spec

    def invalidate_caches(self):
        pass


def _pg_patch(S, G, module, reg):
    """psycopg2's C extension: its _connect (which psycopg2.connect calls) judges
    the connection's targets first, so that a refusal names the rule (see
    _pg_judge). The connection type called directly still meets the OS layer."""
    orig = module.__dict__.get('_connect')
    parse = module.__dict__.get('parse_dsn')
    if orig is None or parse is None or G['_is_own_id'](orig):
        return
    module._connect = _seal(_t_call, (G['_pg_connect_call'], S, orig, parse), reg, orig)


def _dns_patch(S, G, socket_mod, learning, reg):
    """getaddrinfo / gethostbyname(_ex): pinned names answer their pinned
    addresses (so the Python resolver, the Python check and the OS filter judge
    the same addresses); in learning mode the answers are recorded."""
    orig_gai = socket_mod.getaddrinfo
    orig_ghbn = socket_mod.gethostbyname
    orig_ghbn_ex = socket_mod.gethostbyname_ex
    pins = S[5]
    send = S[12]
    js = G['_json']
    tostr = G['_tostr']
    AI_NUMERICHOST = getattr(socket_mod, 'AI_NUMERICHOST', 4)
    judge = G['_gai_judge']

    def record(name, addrs):
        if learning and name:
            key = js({'dns': [[name, addrs]]})
            if key not in S[19]:
                S[19].add(key)
                send(18, key)

    def pinned(host):
        h = tostr(host) if host is not None else None
        if h is None:
            return None, None
        return h, pins.get(h.lower().rstrip('.'))

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        h, p = pinned(host)
        if p:
            out = []
            for fam, v, text in p:
                if family not in (0, socket_mod.AF_INET if fam == 4 else socket_mod.AF_INET6):
                    continue
                out.extend(orig_gai(text, port, family, type, proto, flags | AI_NUMERICHOST))
            if not out:
                raise socket_mod.gaierror(socket_mod.EAI_NONAME, 'Name or service not known')
        else:
            out = orig_gai(host, port, family, type, proto, flags)
            if learning and h:
                record(h, sorted({r[4][0] for r in out if isinstance(r[4], tuple)}))
        e = judge(S, host, port, type, proto, flags, out)
        if e is not None:
            raise e
        return out

    def gethostbyname(host):
        h, p = pinned(host)
        if p:
            for fam, v, text in p:
                if fam == 4:
                    return text
            raise socket_mod.gaierror(socket_mod.EAI_NONAME, 'Name or service not known')
        res = orig_ghbn(host)
        record(h, [res])
        return res

    def gethostbyname_ex(host):
        h, p = pinned(host)
        if p:
            v4 = [t for fam, v, t in p if fam == 4]
            if not v4:
                raise socket_mod.gaierror(socket_mod.EAI_NONAME, 'Name or service not known')
            return (h, [], v4)
        res = orig_ghbn_ex(host)
        record(h, list(res[2]))
        return res

    for f, o in ((getaddrinfo, orig_gai), (gethostbyname, orig_ghbn), (gethostbyname_ex, orig_ghbn_ex)):
        f.__doc__ = o.__doc__
    socket_mod.getaddrinfo = getaddrinfo
    socket_mod.gethostbyname = gethostbyname
    socket_mod.gethostbyname_ex = gethostbyname_ex
    # The socket class's methods that take an address: a host name is resolved
    # by the getaddrinfo above and the socket given the address checked (see
    # _sock_call).
    cls = socket_mod.__dict__.get('socket')
    if type(cls) is type:
        for attr, pos, bind in (('connect', 1, False), ('connect_ex', 1, False), ('bind', 1, True),
                                ('sendto', -1, False), ('sendmsg', 4, False)):
            orig = getattr(cls, attr, None)
            if orig is None or G['_is_own_id'](orig):
                continue
            setattr(cls, attr, _seal(_t_call, (G['_sock_call'], S, orig, (pos, bind, getaddrinfo)), reg, orig))


class _Scan:
    """What os.scandir returns: its entries that the listing shows."""
    __slots__ = ('_g',)

    def __init__(self, g):
        self._g = g

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._g)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def close(self):
        self._g.close()


def _t_list(path=None):
    c = '@sealed'
    return c[0](c[1], c[2], path)


def _t_scan(path=None):
    c = '@sealed'
    return c[0](c[1], c[2], c[3], path)


def _listing_patch(S, G, osmods, reg, extra):
    """os.listdir / os.scandir never reveal names that an ignore= rule hides,
    nor symbolic links to what the program may not see; a glob through a
    directory that is not exposed lists only the names on the way to what is."""
    mine = G['_is_own_id']

    def patch(module):
        for name, tmpl, state in (('listdir', _t_list, (G['_listdir_call'], S)),
                                  ('scandir', _t_scan, (G['_scandir_call'], S))):
            o = module.__dict__.get(name)
            if o is None or mine(o):
                continue
            like = o
            if name == 'listdir':
                # listdir is made of the original scandir (its entries tell
                # which names are symbolic links).
                o = module.__dict__.get('scandir')
                if o is None or mine(o):
                    continue
            st = state[:1] + (S, o) + (() if name == 'listdir' else (_Scan,))
            w = _seal(tmpl, st, reg, like)
            setattr(module, name, w)
    for m in osmods:
        patch(m)
    prev = extra.get('posix')
    extra['posix'] = (lambda module: (prev(module), patch(module))) if prev else patch


def _t_open(path, flags, mode=0o777, **k):
    c = '@sealed'
    return c[0](c[1], c[2], path, flags, mode, k)


def _open_patch(S, G, osmods, reg):
    """os.open with dir_fd: the path is resolved through /proc/self/fd and the
    call made with the absolute path, which the hook then judges (see
    _open_call)."""
    orig = posix.open
    w = _seal(_t_open, (G['_open_call'], S, orig), reg, orig)
    for m in osmods:
        m.open = w


def _namespaces(f, globals, locals):
    """The namespaces eval and exec run code in, as the builtins choose them:
    those given, else the caller's (frame f)."""
    if globals is None:
        globals = f.f_globals
        if locals is None:
            locals = f.f_locals
    elif locals is None:
        locals = globals
    return globals, locals


def _code_patch(S, G, builtins, cfg):
    """eval / exec / compile. Code generated by the runtime and the libraries
    (importlib, stdlib, site-packages, <frozen ...>) is ambient: the originals.
    For user code: the originals when python-api allows them (dynamic-code);
    else, when the policy declares the default eval profile, the eval guard
    (parse, check, rewrite, run under budgets; eval-namespace=caller passes
    through); else refused."""
    kind = G['_frame_kind']
    refuse = G['_api_refuse']
    getframe = sys._getframe
    api = S[8]
    o_eval, o_exec, o_compile = builtins.eval, builtins.exec, builtins.compile
    engine = _eval_engine(S, G, cfg)
    guarded = engine is not None and '' in engine.profiles and engine.profiles[''].namespace != 'caller'
    passthrough = engine is not None and '' in engine.profiles and not guarded

    def check(q, f):
        """True: run the guarded builtin; False: the original."""
        if kind(S, f.f_code) != 'user':
            return False
        v = api.get(q)
        if v is None or v[0]:
            return False
        if guarded:
            return True
        if passthrough:
            return False
        err = refuse(S, q, v)
        if err is not None:
            raise err
        return False

    def eval(source, globals=None, locals=None, /):
        f = getframe(1)
        if check('builtins.eval', f):
            del f
            return engine.builtin_eval(source, globals, locals)
        globals, locals = _namespaces(f, globals, locals)
        del f
        return o_eval(source, globals, locals)

    def exec(source, globals=None, locals=None, /, **kw):
        f = getframe(1)
        if check('builtins.exec', f):
            del f
            return engine.builtin_exec(source, globals, locals, **kw)
        globals, locals = _namespaces(f, globals, locals)
        del f
        return o_exec(source, globals, locals, **kw)

    def compile(source, filename, mode, flags=0, dont_inherit=False, optimize=-1, **kw):
        f = getframe(1)
        if check('builtins.compile', f):
            del f
            return engine.builtin_compile(source, filename, mode, flags, dont_inherit, optimize)
        del f
        return o_compile(source, filename, mode, flags, dont_inherit, optimize, **kw)

    for new, old in ((eval, o_eval), (exec, o_exec), (compile, o_compile)):
        new.__doc__ = old.__doc__
    builtins.eval, builtins.exec, builtins.compile = eval, exec, compile
    # The import system keeps the originals (its calls are ambient anyway): no
    # wrapper frame in import tracebacks, no cost per module.
    for name in ('_frozen_importlib', '_frozen_importlib_external'):
        m = sys.modules.get(name)
        if m is not None:
            m.exec, m.compile, m.eval = o_exec, o_compile, o_eval


def _eval_engine(S, G, cfg):
    """The eval guard's Engine over the policy's eval profiles (None without
    any), reporting its refusals to the host as denials of kind 'eval'; also
    pysandboxes.guarded_eval and the guard's exception classes."""
    E = EVAL
    profiles = cfg.get('eval_profiles')
    if E is None or not profiles:
        return None
    send = S[12]
    js = G['_json']
    sent = S[18]
    describe = E.describe

    def one(exc, msg, target, rule):
        key = exc + msg
        if key in sent or len(sent) >= 1000:
            return
        sent.add(key)
        send(17, js({'kind': 'eval', 'exc': exc, 'msg': msg, 'target': target, 'rule': rule, 'ref': ''}))

    def report(e):
        d = describe(e)
        if d is None:
            return
        if d[1] == 'Rejected':
            for v in e.violations:
                where = 'line %d, col %d: ' % (v['line'], v['col']) if v.get('line') else ''
                add = (' (add: %s)' % v['fix']) if v.get('fix') else ' (no eval- rule allows it)'
                one('Rejected', where + v['message'] + add, v.get('name', ''), '')
        elif d[1] == 'Interrupted':
            one('Interrupted', e.message, e.budget, '')
        else:
            one('Denied', e.message, e.target, '')

    engine = E.Engine(profiles, report)
    sb = sys.modules.get('pysandboxes')
    if sb is not None:
        sb.guarded_eval = engine.guarded_eval
        sb.EvalSyntaxRejected = E.Rejected
        sb.EvalInterrupted = E.Interrupted
    return engine


def _semlock_patch(S, G, module, done=set()):
    """_multiprocessing.SemLock (multiprocessing's locks, semaphores, queues and
    pools): a POSIX semaphore the C library makes in /dev/shm. Learning records
    that the program writes there; a refusal of the OS (a provider that does not
    show /dev/shm writable) names the rule to add."""
    orig = module.__dict__.get('SemLock')
    if type(orig) is not type or id(orig) in done:
        return
    learn = G['_shm_learn']
    refuse = G['_shm_refuse']

    class SemLock(orig):
        __slots__ = ()

        def __new__(cls, *a, **k):
            if S[0]:
                learn(S)
            try:
                return orig.__new__(cls, *a, **k)
            except OSError as e:
                err = refuse(S, 'a POSIX semaphore', e)
                if err is None:
                    raise
                raise err from None
    for attr in ('__name__', '__qualname__', '__module__', '__doc__'):
        try:
            setattr(SemLock, attr, getattr(orig, attr))
        except (AttributeError, TypeError):
            pass
    done.add(id(SemLock))
    done.add(id(orig))
    module.SemLock = SemLock


def _shm_patch(S, G, module, done=set()):
    """_posixshmem.shm_open (multiprocessing.shared_memory): as SemLock."""
    orig = module.__dict__.get('shm_open')
    if orig is None or id(orig) in done:
        return
    learn = G['_shm_learn']
    refuse = G['_shm_refuse']

    def shm_open(path, flags, mode=0o777):
        if S[0]:
            learn(S)
        try:
            return orig(path, flags, mode)
        except OSError as e:
            err = refuse(S, 'a shared memory object', e)
            if err is None:
                raise
            raise err from None
    shm_open.__doc__ = orig.__doc__
    done.add(id(shm_open))
    done.add(id(orig))
    module.shm_open = shm_open


def _environ_patch(S, G, osmod):
    """Learning mode: os.environ records the variables the program reads (not
    those it sets itself, nor whole-mapping iterations)."""
    send = S[12]
    js = G['_json']
    base = type(osmod.environ)
    getframe = sys._getframe
    skip = frozenset(('ItemsView.__iter__', 'ValuesView.__iter__', 'Mapping.__eq__', '_Environ.copy',
                      'Mapping.items', 'Mapping.values', '_Environ.__repr__'))

    class Environ(base):
        def __getitem__(self, key):
            try:
                return base.__getitem__(self, key)
            finally:
                if type(key) is str and key not in self._sb_set:
                    f = getframe(1)
                    q = f.f_code.co_qualname
                    del f
                    if q not in skip:
                        k = js({'env': [key]})
                        if k not in S[19]:
                            S[19].add(k)
                            send(18, k)

        def __setitem__(self, key, value):
            self._sb_set.add(key)
            base.__setitem__(self, key, value)

        def __delitem__(self, key):
            self._sb_set.add(key)
            base.__delitem__(self, key)

    env = osmod.environ
    new = Environ(env._data, env.encodekey, env.decodekey, env.encodevalue, env.decodevalue)
    new._sb_set = set()
    osmod.environ = new


def arm(G, cfg, fd, sb, builtins):
    """Install the hook and the patches. Returns S."""
    reg = G.pop('_register')
    add_hook = sys.addaudithook
    S, hook, gate, ours, cache = build(G, cfg, fd, sb)
    learning = S[0]
    done = {}
    osmods = [posix, sys.modules['os']]
    extra = {'socket': lambda module: _dns_patch(S, G, module, learning, reg)}
    MPT = G['_MPT']
    for modname, table in G['METHOD_PATCHES'].items():
        extra[modname] = lambda module, table=MPT(dict(table)): _patch_methods(module, table, gate, done, reg)
    extra['_multiprocessing'] = lambda module: _semlock_patch(S, G, module)
    extra['_posixshmem'] = lambda module: _shm_patch(S, G, module)
    extra['psycopg2._psycopg'] = lambda module: _pg_patch(S, G, module, reg)
    # Copies: the guard's namespace is reachable from the program.
    tables = MPT({k: MPT(dict(v)) for k, v in G['PATCHES'].items()})
    patch = _seal(_t_patch, (_after, (tables, gate, done, reg, extra)), reg)
    for modname in set(G['PATCHES']) | set(extra):
        m = sys.modules.get(modname)
        if m is not None:
            patch(modname, m)
    _listing_patch(S, G, osmods, reg, extra)
    _open_patch(S, G, osmods, reg)
    if not learning:
        _code_patch(S, G, builtins, cfg)
    else:
        _environ_patch(S, G, sys.modules['os'])
    mon = getattr(sys, 'monitoring', None)
    if mon is not None:
        for attr in ('use_tool_id', 'register_callback', 'set_events', 'set_local_events'):
            orig = getattr(mon, attr, None)
            if orig is not None:
                try:
                    setattr(mon, attr, _wrap(orig, 'sys.monitoring.' + attr, gate, reg))
                except (AttributeError, TypeError):
                    pass
    _path_patch(S, G, osmods, reg, cache, extra)
    _import_patch(S, G, builtins, reg, patch, extra)
    sys.meta_path.insert(0, _Finder(frozenset(G['PATCHES']) | frozenset(extra), patch))
    add_hook(hook)
    return S


PATH_FUNCTIONS = ('stat', 'lstat', 'access', 'readlink', 'statvfs', 'pathconf', 'mkfifo', 'mknod', 'chroot')


def _path_patch(S, G, osmods, reg, cache, extra):
    """The functions on paths that raise no audit event: judged by the file
    rules (a copy of posix made later is patched too)."""
    impl = G['_path_call']
    mine = G['_is_own_id']

    def patch(module, done={}):
        for name in PATH_FUNCTIONS:
            o = module.__dict__.get(name)
            if o is None or mine(o):
                continue
            w = done.get(id(o))
            if w is None:
                w = _seal(_t_path, (impl, S, o, cache, name), reg, o)
                done[id(o)] = w
            setattr(module, name, w)
    for m in osmods:
        patch(m)
    prev = extra.get('posix')
    extra['posix'] = (lambda module: (prev(module), patch(module))) if prev else patch


def _import_patch(S, G, builtins, reg, patch, extra):
    """The import functions the program calls, and importlib's _imp functions
    that make modules without an audit event, replaced by sealed wrappers."""
    import _imp
    orig = builtins.__import__
    builtins.__import__ = _seal(_t_import, (G['_import_call'], S, orig, False), reg, orig)
    mine = G['_is_own_id']
    # The eval guard imports for evaluated code through a trampoline holding the
    # original __import__: it calls the judged one, and its frame is the layer's
    # (the import is charged to the evaluated code's statement or call).
    E = sys.modules.get('pysandboxes_evalguard')
    t = getattr(E, '_user_import', None) if E is not None else None
    if type(t) is type(_t_import) and '_imp' in t.__globals__:
        t.__globals__['_imp'] = builtins.__import__
        reg(0, t.__code__)

    def importlib_after(module):
        o = module.__dict__.get('import_module')
        if o is not None and not mine(o):
            module.import_module = _seal(_t_import_module, (G['_import_module_call'], S, o), reg, o)
        o = module.__dict__.get('__import__')
        if o is not None and not mine(o):
            module.__import__ = _seal(_t_import, (G['_import_call'], S, o, False), reg, o)

    requested = set()

    def logging_config_after(module):
        # BaseConfigurator.importer imports the names a configuration gives.
        c = getattr(module, 'BaseConfigurator', None)
        o = c.__dict__.get('importer') if c is not None else None
        if type(o) is staticmethod and id(o.__func__) not in requested:
            w = _seal(_t_import, (G['_import_call'], S, o.__func__, True), reg, o.__func__)
            requested.add(id(w))
            c.importer = staticmethod(w)
    for name, fn in (('importlib', importlib_after), ('logging.config', logging_config_after)):
        extra[name] = fn
        if name in sys.modules:
            fn(sys.modules[name])

    def imp_after(module):
        # A fresh copy of _imp holds the original functions: wrapped again.
        for attr, tmpl, impl in (('create_builtin', _t_imp1, '_builtin_call'),
                                 ('create_dynamic', _t_imp_rest, '_dynamic_call'),
                                 ('exec_builtin', _t_imp1, '_exec_ext_call'),
                                 ('exec_dynamic', _t_imp1, '_exec_ext_call')):
            o = module.__dict__.get(attr)
            if o is not None and not mine(o):
                setattr(module, attr, _seal(tmpl, (G[impl], S, o, patch), reg, o))
        o = module.__dict__.get('get_frozen_object')
        if o is not None and not mine(o):
            module.get_frozen_object = _seal(_t_frozen, (G['_frozen_call'], S, o), reg, o)
        o = module.__dict__.get('_fix_co_filename')
        if o is not None and not mine(o):
            module._fix_co_filename = _seal(_t_fixname, (G['_fixname_call'], S, o), reg, o)
    extra['_imp'] = imp_after
    imp_after(_imp)


ARM = globals()
EXTRA_CODES = ()
EVAL = None  # the eval guard's module (set by boot when the policy declares eval profiles)
