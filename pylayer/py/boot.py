# Start-up of a sandboxed interpreter: read the configuration from the channel,
# arm the guard, then run the program as CPython itself would (-c, -m, a script,
# stdin, or the interactive console).

import sys
import posix
import marshal

_MAIN_KEEP = ('__name__', '__doc__', '__package__', '__loader__', '__spec__', '__annotations__', '__builtins__')


def _fatal(fd, msg):
    data = msg.encode('utf-8', 'replace')
    try:
        posix.write(fd, (len(data) + 1).to_bytes(4, 'big') + bytes((19,)) + data)
    except OSError:
        pass
    sys.stderr.write('pysandboxes: ' + msg + '\n')
    raise SystemExit(120)


def _layer(code, ours):
    """True for the code of a frame of the layer (ours: the ids of its code
    objects; and the sealed wrappers made from them, named <pysandboxes/...>)."""
    return id(code) in ours or code.co_filename.startswith('<pysandboxes/')


def _trim(tb, ours):
    """The traceback without the layer's own frames (boot, wrappers, hook)."""
    while tb is not None and _layer(tb.tb_frame.f_code, ours):
        tb = tb.tb_next
    head = tb
    while tb is not None:
        nxt = tb.tb_next
        while nxt is not None and _layer(nxt.tb_frame.f_code, ours):
            nxt = nxt.tb_next
        tb.tb_next = nxt
        tb = nxt
    return head


def _banner(cfg):
    lines = ['SANDBOXES Python %s on %s' % (sys.version.split('\n')[0], sys.platform)]
    rules = cfg.get('rules') or '<arg>'
    if cfg['mode'] == 'learn':
        lines.append("API calls are LEARNED and saved in '%s' at the end of the session." % (cfg.get('learn') or rules))
    else:
        prov = cfg.get('provider') or ''
        extra = " and by the os-sandbox='%s'" % prov if prov and prov not in ('none', 'subprocess') else ''
        lines.append("APIs are LIMITED according to the rules in '%s'%s" % (rules, extra))
    colour = sys.stderr.isatty() and posix.environ.get(b'TERM', b'dumb') != b'dumb'
    if colour:
        return '\n'.join('\x1b[1;31m' + l + '\x1b[0m' for l in lines)
    return '\n'.join('*** ' + l + ' ***' for l in lines)


def main(fd, modules, read):
    # The configuration frame.
    try:
        h = read(5)
        n = int.from_bytes(h[:4], 'big')
        if h[4] != 3 or n < 1 or n > (32 << 20):
            _fatal(fd, 'bad configuration frame')
        cfg = marshal.loads(read(n - 1))
    except (ValueError, EOFError, TypeError) as e:
        _fatal(fd, 'cannot read the configuration: %s' % e)
    posix.set_inheritable(fd, False)
    target = cfg['target']
    kind = target['kind']

    # __main__ as CPython leaves it for -c (the loader's names removed).
    main_mod = sys.modules['__main__']
    md = main_mod.__dict__
    for k in list(md):
        if k not in _MAIN_KEEP:
            del md[k]

    # The public module of the layer.
    import builtins
    sb = type(sys)('pysandboxes')
    sb.__file__ = None
    exec(modules['pysandboxes'], sb.__dict__)
    sys.modules['pysandboxes'] = sb

    # The guard and its arming.
    G = {'__name__': 'pysandboxes._guard', '__builtins__': builtins}
    exec(modules['guard'], G)
    A = {'__name__': 'pysandboxes._arm', '__builtins__': builtins}
    exec(modules['arm'], A)
    # The eval guard (marshalled code, or its source), decoded only when the
    # policy declares eval profiles: loaded before the guard is armed (it
    # captures the raw eval, exec and compile), used by the patched builtins
    # (arm.py) and by pysandboxes.guarded_eval.
    eg = modules.pop('evalguard', None)
    # The loader given with -c (the outermost frame) is the layer's too.
    f = sys._getframe()
    while f.f_back is not None:
        f = f.f_back
    A['EXTRA_CODES'] = tuple(modules.values()) + (f.f_code,)
    del f
    if cfg.get('eval_profiles') and eg is not None:
        if type(eg) is bytes:
            eg = marshal.loads(eg)
        else:
            eg = compile(eg, '<pysandboxes/evalguard>', 'exec', dont_inherit=True)
        E = type(sys)('pysandboxes_evalguard')
        E.__file__ = None
        exec(eg, E.__dict__)
        sys.modules['pysandboxes_evalguard'] = E
        A['EVAL'] = E
        A['EXTRA_CODES'] += (eg,)
    del eg

    if kind == 'worker':
        # Partial mode: the worker arms the guard itself (or not, without the
        # Python layer) once its own imports are done, then serves calls.
        W = {'__name__': 'pysandboxes._worker', '__builtins__': builtins}
        exec(modules['wire'], W)
        exec(modules['worker'], W)
        W['main'](fd, cfg, G, A, sb, builtins, _fatal, _trim)
        raise SystemExit(0)
    if kind == 'zygote' or kind == 'eval':
        # The eval layer: the zygote loads the eval guard and arms the guard, then
        # forks one process per evaluation ('eval': one evaluation, no fork; see
        # zygote.py).
        Z = {'__name__': 'pysandboxes._zygote', '__builtins__': builtins}
        exec(modules['wire'], Z)
        exec(modules['zygote'], Z)
        Z['main'](fd, cfg, G, A, sb, builtins, _fatal, _trim, modules)
        raise SystemExit(0)

    # What running the target needs, imported before the guard is armed (the
    # layer's own imports are never charged to the profile).
    interactive = False
    if kind == 'module' or kind == 'script':
        import runpy  # noqa: F401
    if kind == 'interactive':
        interactive = sys.stdin is not None and sys.stdin.isatty()
        if interactive:
            import code  # noqa: F401
    if sys.flags.interactive or interactive:
        sys.ps1 = '\u26a0 >>> '
        sys.ps2 = '\u26a0 ... '
    ours = None
    try:
        S = A['arm'](G, cfg, fd, sb, builtins)
        ours = S[11]
    except BaseException as e:
        _fatal(fd, 'arming the guard failed: %r' % (e,))
    S[12](16, '{"pid":%d}' % posix.getpid())
    del G, A, S
    _run(cfg, target, kind, interactive, md, ours)


def _run(cfg, target, kind, interactive, md, ours):
    o_exec = _EXEC
    o_compile = _COMPILE
    args = list(target['args'])
    safe = sys.flags.safe_path
    code = 0
    try:
        if kind == 'command':
            sys.argv = ['-c'] + args
            c = o_compile(target['value'] + '\n', '<string>', 'exec', dont_inherit=True)
            o_exec(c, md)
        elif kind == 'module':
            import runpy
            sys.argv = ['-m'] + args
            if not safe:
                sys.path[0] = posix.getcwd()
                runpy._run_module_as_main(target['value'], alter_argv=True)
        elif kind == 'script':
            _run_script(cfg, target, args, md, safe, o_exec, o_compile)
        else:
            sys.argv = ['-' if kind == 'stdin' else ''] + args
            if kind == 'interactive' and interactive:
                import code as codemod
                sys.stderr.write(_banner(cfg) + '\n')
                sys.stderr.flush()
                console = codemod.InteractiveConsole(md)
                console.interact(banner='', exitmsg='')
            else:
                src = sys.stdin.read()
                c = o_compile(src, '<stdin>', 'exec', dont_inherit=True)
                o_exec(c, md)
    except SystemExit:
        raise
    except KeyboardInterrupt as e:
        _report(e, ours)
        _die_by_sigint()
    except BaseException as e:
        _report(e, ours)
        code = 1
    raise SystemExit(code)


def _report(e, ours):
    tb = e.__traceback__
    if ours is not None:
        tb = _trim(tb, ours)
    seen = set()
    x = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        if ours is not None and x is not e:
            x.__traceback__ = _trim(x.__traceback__, ours)
        x = x.__cause__ or x.__context__
    e.__traceback__ = tb
    try:
        sys.excepthook(type(e), e, tb)
    except BaseException:
        pass
    e.__traceback__ = None


def _die_by_sigint():
    import _signal
    try:
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    _KILL(posix.getpid(), _signal.SIGINT)
    raise SystemExit(130)


def _run_script(cfg, target, args, md, safe, o_exec, o_compile):
    path = target['value']
    sys.argv = [path] + args
    full = path if path.startswith('/') else posix.getcwd() + '/' + path
    import os.path as osp
    try:
        st = posix.stat(path)
        isdir = (st.st_mode & 0o170000) == 0o040000
    except OSError as e:
        sys.stderr.write("python: can't open file %r: [Errno %d] %s\n" % (osp.abspath(full), e.errno, e.strerror))
        sys.stderr.flush()
        raise SystemExit(2)
    if isdir or path.endswith('.zip') or path.endswith('.pyz'):
        import runpy
        if not safe:
            sys.path[0] = path
        runpy._run_module_as_main('__main__', alter_argv=False)
        return
    if not safe:
        sys.path[0] = osp.dirname(osp.realpath(full))
    try:
        with open(path, 'rb') as f:
            src = f.read()
    except OSError as e:
        sys.stderr.write("python: can't open file %r: [Errno %d] %s\n" % (osp.abspath(full), e.errno, e.strerror))
        sys.stderr.flush()
        raise SystemExit(2)
    if target.get('skip'):
        i = src.find(b'\n')
        src = b'' if i < 0 else b'\n' + src[i + 1:]
    md['__file__'] = path
    md['__cached__'] = None
    c = o_compile(src, path, 'exec', dont_inherit=True)
    o_exec(c, md)


_EXEC = exec
_COMPILE = compile
_KILL = posix.kill
