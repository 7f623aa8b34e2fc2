# Arming the guard: the state tuple S, the audit hook, and the few patches for
# what no audit event covers (functions without an event, pinned DNS answers,
# filtered listings, os.open's dir_fd, eval/exec/compile, os.environ in learning
# mode). Runs in the child before any user code. The patches are conveniences
# that give precise names and behaviour; the audit hook is the enforcement (a
# patch can be undone by the program, the hook cannot).

import sys
import posix
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
    any_addr = False
    for allow, protos, dirs, prefixes, ports, raw, ref in cfg['net']:
        pf = []
        for addr, bits in prefixes:
            ip = G['_parse_ip'](addr)
            if ip is None:
                continue
            pf.append((ip[0], ip[1], bits))
            if allow and ports and (bits < (32 if ip[0] == 4 else 128)):
                any_addr = True
        rules.append((bool(allow), protos, dirs, tuple(pf), tuple((lo, hi) for lo, hi in ports), raw, ref))
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
         frozenset(ours), send, classes, zygote, MPT(dict(G['API_EVENTS'])), any_addr, frozenset(id(o) for o in own),
         set(), set())
    handlers = MPT(dict(G['HANDLERS']))
    h = G['_hook']
    hook_fn = FUNC(h.__code__, G, '_hook', (handlers.get, {}))
    hook = METHOD(hook_fn, S)
    gate = METHOD(G['_gate'], S)
    return S, hook, gate, frozenset(ours)


def _wrap(orig, qual, gate):
    def w(*a, **k):
        gate(qual)
        return orig(*a, **k)
    try:
        w.__name__ = orig.__name__
        w.__qualname__ = getattr(orig, '__qualname__', orig.__name__)
        w.__doc__ = orig.__doc__
    except (AttributeError, TypeError):
        pass
    return w


def patch_module(mod, table, gate, done):
    for attr, qual in table.items():
        orig = getattr(mod, attr, None)
        if orig is None:
            continue
        if orig in done:
            setattr(mod, attr, done[orig])
            continue
        w = done.get(orig)
        if w is None:
            w = _wrap(orig, qual, gate)
            done[orig] = w
        done[w] = w
        setattr(mod, attr, w)


class _Loader:
    """Runs the real loader, then patches the module."""

    def __init__(self, real, after):
        self._real = real
        self._after = after

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        self._after(module)


class _Finder:
    """First on sys.meta_path: patches the few modules whose functions have no
    audit event, or whose behaviour changes, when they are imported."""

    def __init__(self, hooks):
        self._hooks = hooks

    def find_spec(self, name, path=None, target=None):
        after = self._hooks.get(name)
        if after is None:
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
        spec.loader = _Loader(spec.loader, after)
        return spec

    def invalidate_caches(self):
        pass


def _dns_patch(S, G, socket_mod, learning):
    """getaddrinfo / gethostbyname(_ex): pinned names answer their pinned
    addresses (so the Python resolver, the Python check and the OS filter judge
    the same addresses); in learning mode the answers are recorded."""
    orig_gai = socket_mod.getaddrinfo
    orig_ghbn = socket_mod.gethostbyname
    orig_ghbn_ex = socket_mod.gethostbyname_ex
    pins = S[5]
    send = S[12]
    js = G['_js']
    tostr = G['_tostr']
    AI_NUMERICHOST = getattr(socket_mod, 'AI_NUMERICHOST', 4)

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
            return out
        res = orig_gai(host, port, family, type, proto, flags)
        if learning and h:
            record(h, sorted({r[4][0] for r in res if isinstance(r[4], tuple)}))
        return res

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


def _listing_patch(S, G, osmods):
    """os.listdir / os.scandir never reveal names that an ignore= rule hides."""
    ignored = G['_ignored']
    realpath = G['_realpath']
    tostr = G['_tostr']
    abspath = G['_abspath']
    fdpath = G['_fdpath']

    def base_of(p):
        if p is None:
            p = '.'
        if type(p) is int:
            return fdpath(p)
        s = tostr(p)
        if s is None:
            return None
        a = abspath(s)
        return realpath(a) if a is not None else None

    def hidden(base, name):
        if base is None:
            return False
        n = name if type(name) is str else tostr(name)
        if n is None:
            return False
        return ignored(S, (base.rstrip('/') + '/' + n)) is not None

    def wrap_listdir(orig):
        def listdir(path=None):
            names = orig(path) if path is not None else orig()
            base = base_of(path)
            return [n for n in names if not hidden(base, n)]
        listdir.__doc__ = orig.__doc__
        return listdir

    class _Scan:
        def __init__(self, it, base):
            self._it = it
            self._base = base

        def __iter__(self):
            return self

        def __next__(self):
            while True:
                e = next(self._it)
                if not hidden(self._base, e.name):
                    return e

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.close()

        def close(self):
            self._it.close()

    def wrap_scandir(orig):
        def scandir(path=None):
            it = orig(path) if path is not None else orig()
            return _Scan(it, base_of(path))
        scandir.__doc__ = orig.__doc__
        return scandir

    for m in osmods:
        for name, wrap in (('listdir', wrap_listdir), ('scandir', wrap_scandir)):
            orig = getattr(m, name, None)
            if orig is not None:
                setattr(m, name, wrap(orig))


def _open_patch(S, G, osmods):
    """os.open with dir_fd: the path is resolved through /proc/self/fd and the
    call made with the absolute path, which the hook then judges."""
    abspath = G['_abspath']
    tostr = G['_tostr']
    orig = posix.open

    def open(path, flags, mode=0o777, *, dir_fd=None):
        s = tostr(path)
        if s is not None and not s.startswith('/'):
            a = abspath(s, dir_fd)
            if a is None:
                raise sb_classes[0](2, "Access to '%s' must be accepted by a rule (its dir_fd cannot be resolved)." % s)
            return orig(a, flags, mode)
        return orig(path, flags, mode, dir_fd=dir_fd)
    open.__doc__ = orig.__doc__
    sb_classes = S[13]
    for m in osmods:
        m.open = open


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
        if globals is None:
            globals = f.f_globals
            if locals is None:
                locals = f.f_locals
        elif locals is None:
            locals = globals
        del f
        return o_eval(source, globals, locals)

    def exec(source, globals=None, locals=None, /, **kw):
        f = getframe(1)
        if check('builtins.exec', f):
            del f
            return engine.builtin_exec(source, globals, locals, **kw)
        if globals is None:
            globals = f.f_globals
            if locals is None:
                locals = f.f_locals
        elif locals is None:
            locals = globals
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
    js = G['_js']
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


def _environ_patch(S, G, osmod):
    """Learning mode: os.environ records the variables the program reads (not
    those it sets itself, nor whole-mapping iterations)."""
    send = S[12]
    js = G['_js']
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
    S, hook, gate, ours = build(G, cfg, fd, sb)
    KEEP.append(gate)
    learning = S[0]
    done = {}
    osmods = [posix, sys.modules['os']]
    hooks = {}
    for modname, table in G['PATCHES'].items():
        def after(module, table=table):
            patch_module(module, table, gate, done)
        m = sys.modules.get(modname)
        if m is not None:
            after(m)
        hooks[modname] = after
    prev_socket = hooks.get('socket')

    def socket_after(module):
        if prev_socket:
            prev_socket(module)
        _dns_patch(S, G, module, learning)
    hooks['socket'] = socket_after
    if 'socket' in sys.modules:
        _dns_patch(S, G, sys.modules['socket'], learning)
    if S[3]:
        _listing_patch(S, G, osmods)
    _open_patch(S, G, osmods)
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
                    setattr(mon, attr, _wrap(orig, 'sys.monitoring.' + attr, gate))
                except (AttributeError, TypeError):
                    pass
    sys.meta_path.insert(0, _Finder(hooks))
    sys.addaudithook(hook)
    return S


ARM = globals()
EXTRA_CODES = ()
EVAL = None  # the eval guard's module (set by boot when the policy declares eval profiles)
KEEP = []
