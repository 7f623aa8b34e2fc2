# The worker of partial mode (Sandbox.Call): a sandboxed interpreter that serves
# calls of Python functions from the host over the channel, one at a time.
#
# Start-up (before the guard is armed, so never charged to the profile): the
# modules the worker itself needs (asyncio for coroutines, traceback, the C
# pickler) and the data types an argument may hold are imported; sys.stdout and
# sys.stderr are replaced by streams that send what is printed to the host, frame
# by frame, tagged with the call's id. Then the guard is armed, the init function
# runs, and the worker says it is ready.
#
# Frames (4-byte big-endian length of kind+payload, 1-byte kind, payload):
#   host -> worker  4  CALL    id (8 bytes) | len(fn) (2 bytes) | "module:qualname" | pickle of the
#                              positional arguments (a tuple) | pickle of the keyword arguments (a dict)
#   worker -> host  20 READY   JSON {"pid": n}
#                   21 STDOUT  id | UTF-8 text (at most 64 KiB)
#                   22 STDERR  id | UTF-8 text
#                   23 RESULT  id | protocol 5 pickle of the return value
#                   24 EXC     id | JSON {module, qualname, message, traceback, denials, base, kind}
# Id 0 is the init function (and output outside any call). The host closing its
# end of the channel ends the worker (exit status 0).

import sys
import posix

K_CALL = 4
K_HELLO = 16
K_READY = 20
K_STDOUT = 21
K_STDERR = 22
K_RESULT = 23
K_EXC = 24

CHUNK = 64 << 10
MAX_TEXT = 64 << 10
MAX_HOST_FRAME = 64 << 20
CO_GENERATOR = 0x20
CO_ASYNC_GENERATOR = 0x200

# Imported before the guard is armed: the worker's own needs, then the modules of
# the data types the host's arguments may name (what the argument unpickler
# resolves). They are the worker's: the called code still needs a python-import=
# rule to import them (an application's import is judged, loaded or not).
# encodings.idna is what the C socket module needs for any host name given as a
# str (imported on first use otherwise, and then charged to the calling code).
PRELOAD = ('io', '_pickle', 'traceback', 'asyncio', 'collections', 'datetime', 'decimal', 'fractions', 'uuid',
           'pathlib', 'ipaddress', 'zoneinfo', 'encodings.idna')

# The names an argument pickle may use (what transport.Pickle writes), resolved
# without any import or audit event.
ARG_NAMES = {
    'builtins': ('complex', 'set', 'frozenset', 'bytearray', 'bytes', 'range'),
    'collections': ('OrderedDict', 'Counter', 'deque'),
    'datetime': ('date', 'time', 'datetime', 'timedelta', 'timezone'),
    'zoneinfo': ('ZoneInfo',),
    'decimal': ('Decimal',),
    'fractions': ('Fraction',),
    'uuid': ('UUID',),
    'pathlib': ('PurePosixPath', 'PosixPath', 'PureWindowsPath', 'WindowsPath'),
    'ipaddress': ('IPv4Address', 'IPv6Address', 'IPv4Network', 'IPv6Network', 'IPv4Interface', 'IPv6Interface'),
}


class _State:
    pass


_CORO = [None]


def main(fd, cfg, G, A, sb, builtins, fatal, trim):
    st = _State()
    st.fd = fd
    opts = {}
    for a in cfg['target']['args']:
        k, _, v = a.partition('=')
        opts.setdefault(k, []).append(v)
    st.guard = opts.get('guard', ['1'])[-1] == '1'
    st.max_result = int(opts.get('max-result', [str(16 << 20)])[-1])
    init = cfg['target']['value']

    try:
        for m in PRELOAD:
            __import__(m)
    except BaseException as e:
        fatal(fd, 'the worker cannot import what it needs: %r' % (e,))
    import io
    import _pickle
    import traceback
    st.io = io
    st.unpickler = _pickle.Unpickler
    st.pickler = _pickle.Pickler
    st.format_exception = traceback.format_exception
    st.import_ = builtins.__import__
    st.modules = sys.modules
    st.denials = sb.sandbox_denials
    st.trim = trim
    st.loop = None
    st.cur = 0
    st.lock = sys.modules['_thread'].allocate_lock()
    st.write = posix.write
    st.read = posix.read
    table = {}
    for mod, names in ARG_NAMES.items():
        m = sys.modules[mod]
        for n in names:
            table[(mod, n)] = getattr(m, n)
    st.table = table
    st.Pickler = _pickle.Pickler
    _CORO[0] = sys.modules['types'].CoroutineType
    st.Unpickler = _make_unpickler(st)
    st.Sink = _make_sink(st)

    for p in reversed(opts.get('path', [])):
        sys.path.insert(0, p)
    sys.argv = ['pysandboxes-worker']
    sys.stdout = _make_stream(st, io, K_STDOUT, '<stdout>')
    sys.stderr = _make_stream(st, io, K_STDERR, '<stderr>')

    st.ours = frozenset(id(c) for c in _codes(main))
    if st.guard:
        try:
            S = A['arm'](G, cfg, fd, sb, builtins)
            st.ours = S[11]
        except BaseException as e:
            fatal(fd, 'arming the guard failed: %r' % (e,))
        S[12](K_HELLO, '{"pid":%d}' % posix.getpid())
        del S
    del G, A

    if init:
        try:
            fn = _resolve(st, init)
            r = fn()
            if _is_coroutine(r):
                r = _run_coroutine(st, r)
        except BaseException as e:
            _send_exc(st, 0, e, 'init')
            sys.stdout.flush()
            posix._exit(1)
        del fn, r
    _send_frame(st, K_READY, ('{"pid":%d}' % posix.getpid()).encode())
    _serve(st)


def _codes(fn):
    """The code objects of this module's functions (the layer's own frames when
    no guard is armed)."""
    out = []
    g = fn.__globals__
    for v in list(g.values()):
        c = getattr(v, '__code__', None)
        if c is not None:
            stack = [c]
            while stack:
                c = stack.pop()
                out.append(c)
                stack.extend(x for x in c.co_consts if type(x) is type(c))
    return out


# ---------------------------------------------------------------- frames

def _make_stream(st, io, kind, name):
    class _Binary(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            data = bytes(b)
            _emit(st, kind, data)
            return len(data)

    class Stream(io.TextIOBase):
        """What the called function prints, sent to the host as it is written."""
        encoding = 'utf-8'
        errors = 'backslashreplace'
        line_buffering = True

        def __init__(self):
            self.buffer = _Binary()

        @property
        def name(self):
            return name

        def writable(self):
            return True

        def write(self, s):
            if type(s) is not str:
                if not isinstance(s, str):
                    raise TypeError('write() argument must be str, not %s' % type(s).__name__)
                s = str.__str__(s)
            if s:
                _emit(st, kind, s.encode('utf-8', 'backslashreplace'))
            return len(s)

        def flush(self):
            pass

        def isatty(self):
            return False

        def fileno(self):
            raise io.UnsupportedOperation('fileno: the output of a sandboxed call is sent to the host')

    return Stream()


def _emit(st, kind, data):
    head = st.cur.to_bytes(8, 'big')
    for i in range(0, len(data), CHUNK):
        _send_frame(st, kind, head + data[i:i + CHUNK])


# ---------------------------------------------------------------- pickles

def _make_unpickler(st):
    table = st.table
    base = st.unpickler

    class Unpickler(base):
        """Loads the host's arguments: only the data types of the transport, found
        in a closed table (no import, no pickle.find_class audit event)."""

        def find_class(self, module, name):
            obj = table.get((module, name))
            if obj is None:
                raise TypeError('the argument names %s.%s, which is not a data type of the transport' % (module, name))
            return obj

        def persistent_load(self, pid):
            raise TypeError('persistent ids are not accepted')

    return Unpickler


class _TooLarge(Exception):
    pass


def _make_sink(st):
    limit = st.max_result

    class Sink:
        """The result's pickle, refused as soon as it grows past the limit."""

        def __init__(self):
            self.parts = []
            self.n = 0

        def write(self, b):
            n = len(b)
            self.n += n
            if self.n > limit:
                raise _TooLarge(self.n)
            self.parts.append(bytes(b))
            return n

    return Sink


# ---------------------------------------------------------------- calls

def _resolve(st, spec):
    module, sep, qualname = spec.partition(':')
    if not sep or not module or not qualname:
        raise ValueError('%r is not "module:qualname"' % spec)
    mod = st.modules.get(module)
    if mod is None:
        st.import_(module)
        mod = st.modules[module]
    obj = mod
    for part in qualname.split('.'):
        if part.startswith('<'):
            raise AttributeError('%s: a function defined inside another cannot be called from the host' % spec)
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError('%s is not callable (%s)' % (spec, type(obj).__name__))
    code = getattr(obj, '__code__', None)
    if code is not None and code.co_flags & (CO_GENERATOR | CO_ASYNC_GENERATOR):
        raise TypeError('%s is a generator function: generators cannot be sent across the sandbox boundary' % spec)
    return obj


def _is_coroutine(r):
    return type(r) is _CORO[0]


def _run_coroutine(st, coro):
    asyncio = st.modules['asyncio']
    if st.loop is None:
        st.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(st.loop)
    return st.loop.run_until_complete(coro)


def _serve(st):
    while True:
        try:
            f = _read_frame(st.read, st.fd)
        except SystemExit:
            _exit(3)
        if f is None:
            _exit()
        if f[0] != K_CALL or len(f[1]) < 10:
            _exit(3)
        _call(st, f[1])


def _exit(code=0):
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    raise SystemExit(code)


def _call(st, payload):
    cid = int.from_bytes(payload[:8], 'big')
    fl = int.from_bytes(payload[8:10], 'big')
    spec = payload[10:10 + fl].decode('utf-8', 'replace')
    st.cur = cid
    head = payload[:8]
    try:
        try:
            fn = _resolve(st, spec)
            try:
                f = st.io.BytesIO(payload[10 + fl:])
                u = st.Unpickler(f)
                args = u.load()
                kwargs = u.load()
                if type(args) is not tuple or type(kwargs) is not dict or f.read(1):
                    raise TypeError('not a tuple and a dict')
                del f, u
            except Exception as e:
                raise TypeError('the arguments of %s cannot be loaded in the sandbox: %s' % (spec, e)) from None
            r = fn(*args, **kwargs)
            del args, kwargs
            if _is_coroutine(r):
                r = _run_coroutine(st, r)
            elif type(r).__name__ in ('generator', 'async_generator'):
                raise TypeError('%s returned a %s: generators cannot be sent across the sandbox boundary'
                                % (spec, type(r).__name__))
        except BaseException as e:
            _send_exc(st, cid, e, '')
            return
        sink = st.Sink()
        try:
            st.Pickler(sink, 5).dump(r)
        except _TooLarge as e:
            _send_exc(st, cid, None, 'result-too-large',
                      'the result of %s is larger than the limit of the transport (more than %d bytes, limit %d)'
                      % (spec, e.args[0], st.max_result))
            return
        except BaseException as e:
            _send_exc(st, cid, e, 'unpicklable', prefix='the result of %s cannot be sent to the host: ' % spec)
            return
        finally:
            del r
        sink.parts.insert(0, head)
        _send_frame(st, K_RESULT, b''.join(sink.parts))
    finally:
        st.cur = 0


def _send_exc(st, cid, e, kind, message=None, prefix=''):
    d = _exc_desc(st, e, kind, message, prefix)
    if e is not None:
        e.__traceback__ = None
    _send_frame(st, K_EXC, cid.to_bytes(8, 'big') + _json(d).encode('utf-8', 'backslashreplace'))
