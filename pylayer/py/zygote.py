# The zygote of the eval layer (Sandbox.Eval): a sandboxed interpreter that has
# loaded the eval guard, the modules its profiles allow and the data types of the
# transport, and forks one fresh process per evaluation. Nothing an evaluation
# does is visible to the next: each runs in a process of its own, which ends with
# it.
#
# The zygote runs no evaluated code and arms no guard itself. Each process it
# forks closes every descriptor but its own two pipes, arms the Python layer's
# guard (the evaluated code is refused os.fork, files, sockets... as any
# sandboxed program is), warms the eval guard up on a constant (the pages an
# evaluation touches are then already its own: on this kind of machine a page
# copied on write costs tens of microseconds), says it is ready and waits for
# its one evaluation. The zygote keeps `pool` such processes ready, hands each
# request to one (to one still warming up when none is ready: it cuts its
# warm-up short), applies the evaluation's hard limits to it before it starts
# (RLIMIT_CPU, RLIMIT_AS), relays its frames to the host, kills it when the
# wall-clock timeout passes, when its output grows past the limit or when the
# host cancels, and reaps it. A process that has answered waits until the
# zygote has relayed its answer and ends it: its exit (and the next fork) come
# after the answer has left, not before (on a VM with one CPU, they would
# delay it by milliseconds).
#
# Single mode (single=1: the host could not use forking): the process serves one
# evaluation itself (limits, then the guard armed, then the evaluation) and
# exits; the host enforces the timeout by killing it.
#
# Frames (4-byte big-endian length of kind+payload, 1-byte kind, payload):
#   host -> zygote  32 SETUP   marshal {'modules': marshal blob {name: code or source} (or empty:
#                              the entry is loaded already), 'entry': str, 'profiles': pickle
#                              {name: profile} (or empty: the configuration's eval_profiles),
#                              'preload': [str]}
#                   33 EVAL    id u64 | timeout ms u32 | cpu s u32 | memory u64 | output u64 |
#                              mode u8 (0 eval, 1 exec) | u16 + profile | u16 + filename |
#                              u32 + source (UTF-8) | pickle of the names (a dict)
#                   34 CANCEL  id u64
#   zygote -> host  41 NEED    asks for SETUP
#                   40 READY   JSON {pid, fork, reason, single, pool}
#                   42 STDOUT, 43 STDERR  id | UTF-8 text (id 0: output outside any evaluation)
#                   44 RESULT  id | protocol 5 pickle of the value (eval) or of the names bound (exec)
#                   45 EXC     id | JSON {module, qualname, message, traceback, denials, base, kind,
#                              budget, limit, guard}; guard: the args of a guard exception
#                   46 ENDED   id | JSON {reason, signal, status, cpu, detail}: the process ended
#                              without a result (a limit, a cancellation, a crash)
#                   16 HELLO, 17 DENIAL: relayed from the forked processes
#   child -> zygote 16, 17, 19 FATAL, 42-45 as above, 47 SPARE (warmed up, waiting),
#                   48 TOOK    the EVAL payload's fixed part (to its profile) | when it was read
#                              (u64 ns, CLOCK_MONOTONIC) | the bytes it read after the request:
#                              the process read its request from the channel
#                   49 BACK    flag u8 (1: the channel ended) | the bytes it read from the
#                              channel that it does not serve (a frame, or a malformed start)
#   zygote -> child on its own pipe: u32 length + EVAL payload (a request), or u32 0 (read the
#                   channel: see _designate)

import sys
import posix

K_HELLO = 16
K_DENIAL = 17
K_FATAL = 19
K_SETUP = 32
K_EVAL = 33
K_CANCEL = 34
K_ZREADY = 40
K_NEED = 41
K_OUT = 42
K_ERR = 43
K_RESULT = 44
K_EXC = 45
K_ENDED = 46
K_SPARE = 47
K_TOOK = 48
K_BACK = 49

MAX_HOST_FRAME = 64 << 20
MAX_TEXT = 64 << 10
HEAD = 33  # the fixed part of an EVAL payload
# Processes that die before they are ready, in a row, before the zygote gives up.
SPARE_FAILURES = 3
SIGKILL = 9
SIGXCPU = 24
WNOHANG = 1

_EXEC = exec
_COMPILE = compile
# The types of results pickled at once (see _outcome), with short strings and
# ints: exactly these, never a subclass (whose pickle could call its code).
_SCALARS = frozenset((float, bool, complex, type(None)))

# Imported before the guard is armed (never charged to the profile): what the
# zygote needs, and the modules of the data types the names may hold (see
# worker.py's ARG_NAMES). Kept small: a fork copies the zygote's page tables, and
# an evaluation's process copies each page it writes to.
PRELOAD = ('io', '_pickle', 'traceback', 'resource', 'select', 'gc', 'time')

# The sources a forked process evaluates before it says it is ready: '0', then
# the first of the others that the profile accepts. A source the profile
# rejects stops at the check: the rewriting, compiling, running and pickling
# it would have warmed stay cold (the pages they write to copied, their code
# mapped, at the evaluation; under QEMU's TCG a tenth of a millisecond each).
WARM_UP = ('0', ('(x + 1) * 2 - 3 / 4 < 5 and y', '(x + 1) * 2 - 3 / 4', 'x'))
# The profiles whose warm-up sources are chosen (the others get the first).
WARM_PROFILES = 8


def _request(profile, filename, src, names, eid=0, mode=0):
    """An EVAL payload (without limits)."""
    pb = profile.encode('utf-8')
    fb = filename.encode('utf-8')
    sb = src.encode('utf-8')
    return (eid.to_bytes(8, 'big') + bytes(24) + bytes((mode,)) + len(pb).to_bytes(2, 'big') + pb
            + len(fb).to_bytes(2, 'big') + fb + len(sb).to_bytes(4, 'big') + sb + names)


class _Z:
    pass


class _Child:
    __slots__ = ('pid', 'req', 'rep', 'pidfd', 'buf', 'ready', 'eid', 'deadline', 'reason', 'replied',
                 'out', 'outmax', 'cpu', 'eof', 'status', 'usage', 'fatal', 'mem', 'lim', 'timeout')

    def __init__(self, pid, req, rep):
        self.pid = pid
        self.req = req
        self.rep = rep
        self.pidfd = -1
        self.buf = bytearray()
        self.ready = False
        self.eid = 0
        self.deadline = None
        self.reason = None
        self.replied = False
        self.out = 0
        self.outmax = 0
        self.cpu = 0
        self.eof = False
        self.status = None
        self.usage = 0.0
        self.fatal = ''
        self.mem = 0
        self.lim = None  # the (cpu, memory) limits set on it
        self.timeout = 0  # ms, counted once it has taken its evaluation


class _MemFinder:
    """Serves the eval guard's modules from memory (their code came over the
    channel): nothing is read from the file system."""

    def __init__(self, codes, spec):
        self._codes = codes
        self._spec = spec

    def find_spec(self, name, path=None, target=None):
        if name in self._codes:
            return self._spec(name, self, is_package=False)
        if name + '.__init__' in self._codes:
            return self._spec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name + '.__init__']
        _EXEC(code, module.__dict__)

    def invalidate_caches(self):
        pass


def main(fd, cfg, G, A, sb, builtins, fatal, trim, modules):
    z = _Z()
    opts = {}
    for a in cfg['target']['args']:
        k, _, v = a.partition('=')
        opts.setdefault(k, []).append(v)
    z.guard = opts.get('guard', ['1'])[-1] == '1'
    z.single = cfg['target']['kind'] == 'eval'
    z.pool = max(1, int(opts.get('pool', ['1'])[-1]))
    z.fd = fd
    z.cfg, z.G, z.A, z.sb, z.builtins, z.fatal = cfg, G, A, sb, builtins, fatal

    # The worker's machinery: the closed-table unpickler of the host's data, the
    # bounded result sink, the output streams.
    W = {'__name__': 'pysandboxes._worker', '__builtins__': builtins}
    _EXEC(modules['wire'], W)
    _EXEC(modules['worker'], W)
    try:
        for m in PRELOAD + tuple(W['ARG_NAMES']):
            __import__(m)
    except BaseException as e:
        fatal(fd, 'the eval zygote cannot import what it needs: %r' % (e,))
    import io
    import _pickle
    import traceback
    z.resource = sys.modules['resource']
    z.select = sys.modules['select']
    z.monotonic = sys.modules['time'].monotonic
    z.wait4 = sys.modules['os'].wait4
    z.pidfd_open = getattr(sys.modules['os'], 'pidfd_open', None)
    st = W['_State']()
    st.fd = fd
    st.io = io
    st.unpickler = _pickle.Unpickler
    st.Pickler = _pickle.Pickler
    st.dumps = _pickle.dumps
    st.format_exception = traceback.format_exception
    st.denials = sb.sandbox_denials
    st.trim = trim
    st.cur = 0
    st.lock = sys.modules['_thread'].allocate_lock()
    st.write = posix.write
    st.read = posix.read
    st.max_result = int(opts.get('max-result', [str(16 << 20)])[-1])
    table = {}
    for mod, names in W['ARG_NAMES'].items():
        m = sys.modules[mod]
        for n in names:
            table[(mod, n)] = getattr(m, n)
    st.table = table
    st.Unpickler = W['_make_unpickler'](st)
    st.Sink = W['_make_sink'](st)
    st.TooLarge = W['_TooLarge']
    z.stream = W['_make_stream']
    z.st = st

    # The eval guard and what the profiles allow, from the host.
    _send_frame(st, K_NEED, b'')
    setup = _marshal_loads(_host_frame(z, K_SETUP))
    try:
        mods = _marshal_loads(setup['modules']) if setup['modules'] else {}
        codes = {}
        for name, v in mods.items():
            if type(v) is str:
                v = _COMPILE(v, '<pysandboxes/' + name + '>', 'exec', dont_inherit=True)
            codes[name] = v
        # The guard's code is the layer's own: its frames are not the user's.
        A['EXTRA_CODES'] = tuple(A['EXTRA_CODES']) + tuple(codes.values())
        spec = sys.modules['_frozen_importlib'].ModuleSpec
        sys.meta_path.insert(0, _MemFinder(codes, spec))
        entry = setup['entry']
        __import__(entry)
        mod = sys.modules[entry]
        z.run = mod.run
        z.ready = getattr(mod, 'ready', None)
        z.describe = getattr(mod, 'describe', None)
        if setup['profiles']:
            profiles = st.Unpickler(io.BytesIO(setup['profiles'])).load()
        else:
            profiles = cfg.get('eval_profiles') or {}  # the policy's
        if type(profiles) is not dict:
            raise TypeError('the profiles are not a dict')
        # Checked once here (the guard's Profile), not at each evaluation.
        cp = getattr(mod, 'compile_profile', None)
        z.profiles = {k: (cp(v) if cp is not None else v) for k, v in profiles.items()}
    except BaseException as e:
        fatal(fd, 'the eval zygote cannot load the eval guard: %r' % (e,))
    for m in setup.get('preload', ()):
        try:
            __import__(m)
        except BaseException:
            pass
    for p in z.profiles.values():
        _warm_one(z, st, p)
    # What each forked process runs before it says it is ready: evaluations of
    # constant sources, through the whole path, so that the pages an evaluation
    # writes to are copied before one arrives.
    z.warm = {}
    names = _pickle.dumps({'x': 1, 'y': 'a'}, 5)
    for i, (name, prof) in enumerate(z.profiles.items()):
        pick = WARM_UP[1][0]
        for src in WARM_UP[1] if i < WARM_PROFILES else ():
            try:
                z.run(src, {'x': 1, 'y': 'a'}, prof, 'eval', '<eval:warm-up>')
            except BaseException:
                continue
            pick = src
            break
        z.warm[name] = [_request(name, '<eval:warm-up>', src, names) for src in (WARM_UP[0], pick)]
    del setup, mods, codes, mod, G, A

    sys.argv = ['pysandboxes-eval']
    # What is printed is sent as frames tagged with st.cur on st.fd: the host's
    # channel in the zygote, the pipe to the zygote in a forked process.
    sys.stdout = z.stream(st, io, K_OUT, '<stdout>')
    sys.stderr = z.stream(st, io, K_ERR, '<stderr>')
    st.ours = frozenset(id(c) for c in _codes(main) + W['_codes'](W['main']))
    del W
    try:
        z.resource.setrlimit(z.resource.RLIMIT_CORE, (0, 0))  # no core file from a killed evaluation
    except (OSError, ValueError):
        pass
    if z.single:
        _single(z, st)
        return
    if z.guard:
        # Armed once, here: each forked process inherits the hook. The zygote's
        # own calls (fork, prlimit, kill) pass because its pid is the one the
        # guard recorded (S[14]); in every forked process they are judged.
        try:
            _arm(z, st, z.fd)
        except BaseException as e:
            z.fatal(z.fd, 'arming the guard failed: %r' % (e,))
        for p in z.profiles.values():
            _warm_one(z, st, p)
    gc = sys.modules['gc']
    gc.collect()
    gc.freeze()  # the collector of a forked process leaves the zygote's objects alone
    _zygote(z, st)


def _codes(fn):
    out = []
    for v in list(fn.__globals__.values()):
        c = getattr(v, '__code__', None)
        if c is None and type(v) is type:
            for a in v.__dict__.values():
                c2 = getattr(a, '__code__', None)
                if c2 is not None:
                    out.append(c2)
            continue
        if c is not None:
            out.append(c)
    stack = list(out)
    while stack:
        c = stack.pop()
        for x in c.co_consts:
            if type(x) is type(c):
                out.append(x)
                stack.append(x)
    return out


def _marshal_loads(b):
    return sys.modules['marshal'].loads(b)


def _host_frame(z, kind):
    f = _read_frame(posix.read, z.fd)
    if f is None:
        raise SystemExit(0)
    if f[0] != kind:
        raise SystemExit(3)
    return f[1]


def _send_json(z, st, kind, eid, d):
    payload = _json(d).encode('utf-8', 'backslashreplace')
    if eid is not None:
        payload = eid.to_bytes(8, 'big') + payload
    _send_frame(st, kind, payload)


# ---------------------------------------------------------------- the zygote

def _zygote(z, st):
    select = z.select
    poll = select.poll()
    z.IN = select.POLLIN | select.POLLHUP | select.POLLERR
    poll.register(z.fd, z.IN)
    z.poll = poll
    z.fds = {}        # pipe or pidfd -> child
    z.children = []   # every child not reaped
    z.running = {}    # evaluation id -> child
    z.queue = []      # EVAL payloads waiting for a ready child
    z.inbuf = bytearray()  # what the host sent, not yet a whole frame
    z.failures = 0
    z.zombies = []    # children whose end is polled (no pidfd)
    z.lim = None      # the limits processes forked now set ahead of their request (see _child)
    z.profile = next(iter(z.profiles), None)  # the profile of the last evaluation
    z.last = None     # the limits of the last evaluation
    z.reader = None   # the process reading the channel (see _designate), or None: the zygote
    z.direct = True
    # One processor (a VM with one vCPU): the relay that reads the channel
    # runs only when the zygote lets it (see _release).
    try:
        z.one_cpu = len(posix.sched_getaffinity(0)) == 1
    except (AttributeError, OSError):
        z.one_cpu = False
    # On one processor the zygote runs under SCHED_BATCH, and the processes it
    # forks with it: a woken SCHED_BATCH process does not preempt the one
    # running, so the TOOK a process writes as it starts its evaluation is read
    # when that process waits, or at the scheduler's next tick if the
    # evaluation computes on, not at once. Not SCHED_IDLE: a zygote under
    # SCHED_IDLE gets almost nothing of a processor that another program of
    # the same VM keeps busy (weight 3 against 1024), and its relays then took
    # seconds each.
    if z.one_cpu:
        try:
            posix.sched_setscheduler(0, posix.SCHED_BATCH, posix.sched_param(0))
        except (AttributeError, OSError, ValueError):
            pass
    err = _spawn(z, st)
    if err is not None:
        # Forking does not work here: the host serves evaluations with fresh
        # processes instead.
        _send_json(z, st, K_ZREADY, None, {'pid': posix.getpid(), 'fork': False, 'reason': err,
                                           'single': False, 'pool': z.pool})
        while _read_frame(posix.read, z.fd) is not None:
            pass
        raise SystemExit(0)
    _send_json(z, st, K_ZREADY, None, {'pid': posix.getpid(), 'fork': True, 'reason': '', 'single': False,
                                       'pool': z.pool})
    _refill(z, st)
    while True:
        timeout = -1
        now = z.monotonic()
        for c in z.running.values():
            if c.deadline is not None and c.reason is None:
                ms = int((c.deadline - now) * 1000) + 1
                timeout = ms if timeout < 0 else min(timeout, ms)
        if z.zombies:
            timeout = 5 if timeout < 0 else min(timeout, 5)
        try:
            events = poll.poll(max(timeout, 0) if timeout >= 0 else None)
        except InterruptedError:
            events = ()
        for fd, ev in events:
            if fd == z.fd:
                _host_input(z, st)
                continue
            c = z.fds.get(fd)
            if c is None:
                continue
            if fd == c.pidfd:
                _reap(z, st, c)
            else:
                _readable(z, st, c)
        now = z.monotonic()
        for c in list(z.running.values()):
            if c.deadline is not None and c.reason is None and now >= c.deadline:
                _kill(c, 'timeout')
        for c in list(z.zombies):
            _reap(z, st, c)
        _refill(z, st)
        _dispatch(z, st)
        _designate(z)


def _designate(z):
    """Let a ready process read the next request from the channel itself, when
    the zygote has nothing queued and no partial frame: the request then
    reaches the process that evaluates it without passing through the zygote
    (on a VM with one vCPU, each process woken on the way costs about a
    millisecond under QEMU's TCG). While a process reads, the zygote leaves the
    channel alone; the process reads one frame (and passes on whatever its
    read got after it), and either reports the EVAL it took (TOOK) and closes
    its descriptor of the channel before it evaluates anything, or hands back
    what it read (BACK) and ends."""
    if z.reader is not None or z.queue or z.inbuf or not z.direct:
        return
    for c in z.children:
        if c.ready and c.eid == 0 and c.status is None and not c.eof and c.reason is None:
            try:
                posix.write(c.req, bytes(4))
            except OSError:
                return
            z.reader = c
            z.poll.unregister(z.fd)
            return


def _reclaim(z, c):
    """The channel is the zygote's again (c, its reader, is done with it)."""
    if z.reader is c:
        z.reader = None
        z.poll.register(z.fd, z.IN)


def _spares(z):
    return sum(1 for c in z.children if c.eid == 0 and c.status is None and not c.eof and c.reason is None)


def _refill(z, st):
    """Fork processes until pool are ready or warming. While evaluations run,
    only when one waits for a process: a fork copies the zygote's page tables,
    milliseconds the replies in flight would wait for."""
    if z.running and not (z.queue and _spares(z) == 0):
        return
    while _spares(z) < z.pool:
        err = _spawn(z, st)
        if err is not None:
            z.failures += 1
            if z.failures >= SPARE_FAILURES:
                _give_up(z, st, err)
            return


def _give_up(z, st, why):
    _send_frame(st, K_FATAL, ('the eval zygote cannot keep processes ready: %s' % why).encode('utf-8', 'replace'))
    _shutdown(z)
    raise SystemExit(120)


def _spawn(z, st):
    """Fork one process that arms the guard, warms up and waits for its
    evaluation. Returns None, or why forking failed."""
    try:
        req_r, req_w = posix.pipe()
    except OSError as e:
        return 'pipe(): %s' % (e,)
    try:
        rep_r, rep_w = posix.pipe()
    except OSError as e:
        posix.close(req_r)
        posix.close(req_w)
        return 'pipe(): %s' % (e,)
    try:
        pid = posix.fork()
    except OSError as e:
        for x in (req_r, req_w, rep_r, rep_w):
            posix.close(x)
        return 'os.fork(): %s' % (e,)
    if pid == 0:
        _child(z, st, req_r, rep_w)
    posix.close(req_r)
    posix.close(rep_w)
    posix.set_blocking(rep_r, False)
    c = _Child(pid, req_w, rep_r)
    c.lim = z.lim  # what it sets ahead of its request (see _child)
    z.children.append(c)
    z.fds[rep_r] = c
    z.poll.register(rep_r, z.IN)
    if z.pidfd_open is not None:
        try:
            c.pidfd = z.pidfd_open(pid)
        except OSError:
            z.pidfd_open = None
    if c.pidfd >= 0:
        z.fds[c.pidfd] = c
        z.poll.register(c.pidfd, z.IN)
    return None


def _host_input(z, st):
    """Read what the host sent and handle each whole frame: one read for a
    request and its header, not two (a system call costs tens of
    microseconds under QEMU's TCG)."""
    try:
        data = posix.read(z.fd, 1 << 16)
    except InterruptedError:
        return
    if not data:
        _shutdown(z)
        raise SystemExit(0)
    _host_bytes(z, st, data)


def _host_bytes(z, st, data):
    buf = z.inbuf
    buf += data
    i = 0
    while len(buf) - i >= 5:
        n = int.from_bytes(buf[i:i + 4], 'big')
        if n < 1 or n > MAX_HOST_FRAME:
            raise SystemExit(3)
        if len(buf) - i < 4 + n:
            break
        kind = buf[i + 4]
        p = bytes(buf[i + 5:i + 4 + n])
        i += 4 + n
        _host(z, st, kind, p)
    if i:
        del buf[:i]


def _host(z, st, kind, p):
    if kind == K_EVAL:
        if len(p) < HEAD:
            raise SystemExit(3)
        # The limits set ahead by processes forked from now on: those of the
        # last two evaluations when they were the same, else none (limits
        # that change from one evaluation to the next would make processes
        # set ahead unfit, each replaced by a fresh fork).
        _note(z, p)
        z.queue.append(p)
        _dispatch(z, st)
    elif kind == K_CANCEL:
        eid = int.from_bytes(p[:8], 'big')
        c = z.running.get(eid)
        if c is not None:
            _kill(c, 'cancel')
            return
        for i, q in enumerate(z.queue):
            if int.from_bytes(q[:8], 'big') == eid:
                del z.queue[i]
                _send_json(z, st, K_ENDED, eid, {'reason': 'cancel', 'signal': 0, 'status': 0, 'cpu': 0.0,
                                                 'detail': 'cancelled before it started'})
                break
    else:
        raise SystemExit(3)


def _note(z, p):
    lim = _limits(p)
    z.lim = lim if lim == z.last else None
    z.last = lim
    n = int.from_bytes(p[HEAD:HEAD + 2], 'big')
    z.profile = p[HEAD + 2:HEAD + 2 + n].decode('utf-8', 'replace')


def _dispatch(z, st):
    while z.queue:
        # A process ready, else one still warming up: it stops its warm-up
        # when it sees the request (each warm-up step only moves page faults
        # before a request: with one waiting, it would only delay it).
        # A process whose limits set ahead do not fit the request's is
        # ended: it cannot raise them (the processes forked next have the
        # request's, or none).
        p = z.queue[0]
        lim = _limits(p)
        c = None
        for x in z.children:
            if x.eid == 0 and x.status is None and not x.eof and x.reason is None and x is not z.reader:
                if not _fits(x.lim, lim):
                    _kill(x, 'unfit')
                    continue
                if x.ready:
                    c = x
                    break
                if c is None:
                    c = x
        if c is None:
            return
        z.queue.pop(0)
        _assign(z, c, p)
        try:
            # The process sets its limits itself (a prlimit of another process
            # is refused under providers without a pid namespace).
            buf = len(p).to_bytes(4, 'big') + p
            mv = memoryview(buf)
            while mv:
                try:
                    k = posix.write(c.req, mv)
                except InterruptedError:
                    continue
                mv = mv[k:]
        except OSError as e:
            c.fatal = 'the evaluation could not be handed to its process: %s' % (e,)
            _kill(c, 'failed')
        # The timeout counts from the moment the process takes the evaluation:
        # now if it is ready, else when it has cut its warm-up short.
        if c.timeout and c.ready:
            c.deadline = z.monotonic() + c.timeout / 1000.0
        # c.req stays open until the answer is relayed (_release): the
        # process waits for its end there, so that its exit does not run
        # before the answer has left.


def _assign(z, c, p):
    """c evaluates request p (its fixed part, at least)."""
    cpu, mem = _limits(p)
    eid = int.from_bytes(p[0:8], 'big')
    c.eid = eid
    c.outmax = int.from_bytes(p[24:32], 'big')
    c.cpu = cpu
    c.mem = mem
    c.timeout = int.from_bytes(p[8:12], 'big')
    z.running[eid] = c


def _kill(c, reason):
    if c.reason is None:
        c.reason = reason
    if c.status is None:
        try:
            posix.kill(c.pid, SIGKILL)
        except OSError:
            pass


def _readable(z, st, c, drain=False):
    """Read what c wrote. drain: c has ended, read to the end of its pipe."""
    while not c.eof:
        try:
            # At most a pipe's capacity (64 KiB), which one read never
            # exceeds: a larger buffer is above malloc's mmap threshold (128
            # KiB), an mmap and a munmap for each read (natively about 20
            # times the cost of the read itself; more under QEMU's TCG).
            data = posix.read(c.rep, 1 << 16)
        except InterruptedError:
            continue
        except BlockingIOError:
            if not drain:
                return
            data = b''  # a process of its own still holds the pipe: what it writes is not read
        except OSError:
            data = b''
        if not data:
            _eof(z, st, c)
            return
        _frames(z, st, c, data)
        if not drain:
            return


def _eof(z, st, c):
    if c.eof:
        return
    c.eof = True
    z.poll.unregister(c.rep)
    del z.fds[c.rep]
    posix.close(c.rep)
    c.rep = -1
    if c.status is not None:
        _finish(z, st, c)
    elif c.pidfd < 0:
        z.zombies.append(c)


def _frames(z, st, c, data):
    c.buf += data
    limit = st.max_result + (1 << 20)
    if c is z.reader:
        limit = max(limit, MAX_HOST_FRAME + (1 << 17))  # what it hands back: a frame and what followed
    buf = c.buf
    i = 0
    while len(buf) - i >= 5:
        n = int.from_bytes(buf[i:i + 4], 'big')
        if n < 1 or n > limit:
            c.fatal = 'the evaluation process sent a frame of %d bytes' % n
            _kill(c, 'protocol')
            c.buf = bytearray()
            return
        if len(buf) - i < 4 + n:
            break
        kind = buf[i + 4]
        payload = bytes(buf[i + 5:i + 4 + n])
        i += 4 + n
        _frame(z, st, c, kind, payload)
        if c.reason == 'protocol':
            c.buf = bytearray()
            return
    if i:
        del buf[:i]


def _frame(z, st, c, kind, p):
    if c.reason is not None:
        return  # killed: what it still says is dropped
    if kind == K_HELLO or kind == K_DENIAL:
        _send_frame(st, kind, p)
        return
    if kind == K_SPARE and not c.ready:
        # Warmed up, or its warm-up cut short by a request handed to it.
        c.ready = True
        z.failures = 0
        if c.eid == 0:
            _dispatch(z, st)
        elif c.timeout:
            c.deadline = z.monotonic() + c.timeout / 1000.0
        return
    if c is z.reader and (kind == K_TOOK or kind == K_BACK):
        _reclaim(z, c)
        if kind == K_BACK:
            # Not a request it serves: the zygote handles what it read, and
            # it ends (a deliberate end, not a failure).
            c.reason = 'handed back'
            _kill(c, 'handed back')
            if len(p) < 1:
                raise SystemExit(3)
            if p[1:]:
                _host_bytes(z, st, p[1:])
            if p[0] == 1:
                _shutdown(z)
                raise SystemExit(0)
            return
        end = HEAD + 2 + int.from_bytes(p[HEAD:HEAD + 2], 'big') if len(p) >= HEAD + 2 else 0
        if not end or len(p) < end + 8 or int.from_bytes(p[:8], 'big') in z.running:
            # The request it read cannot be served: as if it had ended.
            _give_up(z, st, 'the process reading the channel took a request it cannot serve')
        took = int.from_bytes(p[end:end + 8], 'big') / 1e9
        _assign(z, c, p)
        if c.timeout:
            c.deadline = took + c.timeout / 1000.0
        _note(z, p[:end])
        if len(p) > end + 8:
            _host_bytes(z, st, p[end + 8:])  # what followed the request
        return
    if c.eid == 0:
        if kind == K_FATAL:
            c.fatal = p.decode('utf-8', 'replace')[:4096]
        else:
            c.fatal = 'frame of kind %d before its evaluation' % kind
            _kill(c, 'protocol')
        return
    if kind == K_FATAL:
        c.fatal = p.decode('utf-8', 'replace')[:4096]
        return
    if kind not in (K_OUT, K_ERR, K_RESULT, K_EXC) or len(p) < 8 or int.from_bytes(p[:8], 'big') != c.eid \
            or c.replied:
        c.fatal = 'unexpected frame of kind %d' % kind
        _kill(c, 'protocol')
        return
    if kind == K_OUT or kind == K_ERR:
        c.out += len(p) - 8
        if c.outmax and c.out > c.outmax:
            _kill(c, 'output')
            return
    else:
        c.replied = True
        z.running.pop(c.eid, None)
    _send_frame(st, kind, p)
    if c.replied:
        _release(z, c)


def _release(z, c):
    """End the process whose answer was just relayed. On one processor, the
    answer is first given a chance to leave: yielding lets the relay that
    reads the channel (QEMU's guest init, on a guest with one vCPU) send it
    before the process's exit and the next fork take the processor; both are
    off the critical path of the answer then. (With more processors the relay
    runs elsewhere.)"""
    if z.one_cpu:
        try:
            posix.sched_yield()
        except OSError:
            pass
    if c.req >= 0:
        posix.close(c.req)
        c.req = -1
    # And it ends now, whatever the evaluated code did to its descriptors
    # (its end is reaped as usual; being answered, it reports nothing).
    if c.status is None:
        try:
            posix.kill(c.pid, SIGKILL)
        except OSError:
            pass


def _reap(z, st, c):
    """Reap c if it has ended (never waits: an event may be stale, its
    descriptor number reused by a newer process)."""
    if c.status is not None:
        return
    try:
        pid, status, ru = z.wait4(c.pid, WNOHANG)
    except ChildProcessError:
        pid, status, ru = c.pid, 0, None
    if pid == 0:
        return
    c.status = status
    if ru is not None:
        c.usage = ru.ru_utime + ru.ru_stime
    if c.pidfd >= 0:
        z.poll.unregister(c.pidfd)
        del z.fds[c.pidfd]
        posix.close(c.pidfd)
        c.pidfd = -1
    if c in z.zombies:
        z.zombies.remove(c)
    if not c.eof:
        _readable(z, st, c, True)  # what it wrote before it ended
    else:
        _finish(z, st, c)


def _finish(z, st, c):
    if c in z.children:
        z.children.remove(c)
    if c.req >= 0:
        posix.close(c.req)
        c.req = -1
    status = c.status or 0
    sig = status & 0x7f
    code = (status >> 8) & 0xff if sig == 0 else 0
    if c is z.reader:
        # It may have taken a request off the channel that nobody will
        # answer: the zygote cannot tell, and ends (the host fails what is in
        # flight and starts another).
        why = c.fatal or ('status %d' % code if sig == 0 else 'signal %d' % sig)
        _give_up(z, st, 'the process reading the channel ended before it said what it read (%s)' % why)
    if c.eid == 0:
        if c.reason is None:
            z.failures += 1
            if z.failures >= SPARE_FAILURES:
                why = c.fatal or ('it ended with status %d' % code if sig == 0 else 'signal %d' % sig)
                _give_up(z, st, why)
        return
    z.running.pop(c.eid, None)
    if c.replied and c.reason is None:
        return
    reason = c.reason
    if reason is None:
        if sig == SIGXCPU or (sig == SIGKILL and c.cpu and c.usage >= c.cpu):
            reason = 'cpu'
        else:
            reason = 'died'
    _send_json(z, st, K_ENDED, c.eid, {'reason': reason, 'signal': sig, 'status': code, 'cpu': c.usage,
                                       'detail': c.fatal})


def _shutdown(z):
    for c in list(z.children):
        _kill(c, 'shutdown')
    for c in list(z.children):
        try:
            z.wait4(c.pid, 0)
        except ChildProcessError:
            pass


# ---------------------------------------------------------------- one evaluation

def _close_others(keep, known):
    """Close every descriptor from 3 up but keep: those the zygote knows of
    (known), and any other below them (descriptors are allocated lowest first)."""
    hi = max(tuple(known) + tuple(keep) + (2,)) + 64
    lo = 3
    for k in sorted(keep):
        if k >= lo:
            posix.closerange(lo, k)
            lo = k + 1
    posix.closerange(lo, hi)


def _arm(z, st, fd):
    S = z.A['arm'](z.G, z.cfg, fd, z.sb, z.builtins)
    st.ours = S[11]
    z.exempt = S[14]
    S[12](K_HELLO, '{"pid":%d}' % posix.getpid())


def _warm_one(z, st, profile):
    try:
        r = z.run('0', {}, profile, 'eval', '<eval:warm-up>')
        st.Pickler(st.Sink(), 5).dump(r)
        st.Unpickler(st.io.BytesIO(b'\x80\x05}\x94.')).load()
    except BaseException:
        pass


def _limits(p):
    """The (cpu seconds, address space bytes) limits of request p (0: none)."""
    return int.from_bytes(p[12:16], 'big'), int.from_bytes(p[16:24], 'big')


def _fits(pre, lim):
    """Whether a process whose limits were set to pre ahead of its request
    can take limits lim: each the same, or lower (a hard limit can be lowered,
    never raised), or none was set ahead."""
    if pre is None:
        return True
    for a, b in zip(pre, lim):
        if a and not (b and b <= a):
            return False
    return True


def _self_limit(z, lim, pre=None):
    """Set this evaluation process's hard limits lim (cpu seconds, address
    space bytes; 0: none), but those already set to the same value (pre: the
    limits set ahead of the request, or None), before it evaluates anything:
    the guard lets the layer's call through while the pid is in its exempt
    set."""
    cpu, mem = lim
    if pre is not None:
        cpu = 0 if cpu == pre[0] else cpu
        mem = 0 if mem == pre[1] else mem
    if not cpu and not mem:
        return
    R = z.resource
    me = posix.getpid()
    ex = getattr(z, 'exempt', None)
    if ex is not None:
        ex.add(me)
    try:
        if cpu:
            R.setrlimit(R.RLIMIT_CPU, (cpu, cpu + 1))
        if mem:
            R.setrlimit(R.RLIMIT_AS, (mem, mem))
    finally:
        if ex is not None:
            ex.discard(me)


def _child(z, st, req, rep):
    code = 0
    chan = -1
    try:
        # The pipe to the zygote takes the channel's descriptor number: what the
        # guard sends (its refusals) goes there too. The channel itself is
        # kept aside until a request is taken (see _designate), and closed
        # before anything is evaluated.
        if z.direct:
            chan = posix.dup(z.fd)
        posix.dup2(rep, z.fd)
        posix.close(rep)
        known = [req, rep, chan] + list(z.fds)
        for c in z.children:
            known.append(c.req)
        _close_others((z.fd, req, chan), known)
        # Warm up, unless (or until) a request is handed over: a request
        # already waiting is served at once.
        waiting = z.select.poll()
        waiting.register(req, z.select.POLLIN | z.select.POLLHUP)
        z.poll = None
        for p in z.warm.get(z.profile) or next(iter(z.warm.values()), ()):
            if waiting.poll(0):
                break
            try:
                _outcome(z, st, p)
            except BaseException:
                pass
        del waiting
        # The limits of the last evaluations, set now when they were the
        # same twice in a row (the usual case: a sandbox's evaluations share
        # them): the request then only finds them in place (setrlimit runs
        # the guard's audit hook; under QEMU's TCG, about a millisecond on the
        # evaluation's path). The zygote hands this process only a request
        # whose limits are these or lower (see _fits).
        pre = z.lim
        if pre is not None:
            _self_limit(z, pre)
        # The eval guard's state for an evaluation under the profile of the
        # last one (its helpers, builtins and shims: under TCG, about half a
        # millisecond), made while the process waits (see the guard's ready).
        z.pre = None
        if z.ready is not None and z.profile in z.profiles:
            try:
                z.pre = (z.profile, z.ready(z.profiles[z.profile]))
            except BaseException:
                z.pre = None
        # The code of the request's path that the warm-up does not run: its
        # functions and code objects written to (their reference counts)
        # now, not at the request (under TCG a copied page costs a tenth of
        # a millisecond), and the checks of a request run once.
        for f in (_take_request, _read_channel, _readx, _hand_back, _fits, _limits, _self_limit, _evaluate,
                  _outcome):
            f.__code__
        _fits(pre, _limits(bytes(HEAD)))
        _send_frame(st, K_SPARE, b'')
        payload = _take_request(req)
        took = None
        if payload == b'' and chan >= 0:
            payload, took, after = _read_channel(z, st, chan, req, pre)
        if chan >= 0:
            posix.close(chan)
            chan = -1
        if payload is None or len(payload) < HEAD:
            posix._exit(3)
        if took is not None:
            n = int.from_bytes(payload[HEAD:HEAD + 2], 'big')
            _send_frame(st, K_TOOK, payload[:HEAD + 2 + n] + took.to_bytes(8, 'big') + after)
            del after
        _self_limit(z, _limits(payload), pre)
        _evaluate(z, st, payload)
        # The end: when the zygote has relayed the answer and closes the pipe.
        try:
            _readn(posix.read, req, 1)
        except OSError:
            pass
    except BaseException as e:
        try:
            _send_frame(st, K_FATAL, ('the evaluation process failed: %r' % (e,)).encode('utf-8', 'replace'))
        except BaseException:
            pass
        code = 1
    finally:
        posix._exit(code)


def _read_channel(z, st, chan, req, pre):
    """The request this process reads from the channel itself, when it read
    it (ns), and what it read after it (the start of the frames that follow,
    which the zygote handles: usually nothing; one read, not one for the
    length and one for the rest). A frame it does not serve (not an EVAL, or
    limits that do not fit those set ahead, pre) is handed back to the
    zygote with what followed it, and the process ends."""
    sel = z.select
    w = sel.poll()
    w.register(chan, sel.POLLIN)
    w.register(req, sel.POLLIN)
    while True:
        try:
            evs = w.poll()
        except InterruptedError:
            continue
        for fd, ev in evs:
            if fd == req:
                posix._exit(0)  # the zygote let it go (it writes nothing else here)
        if evs:
            break
    buf = b''
    while True:
        try:
            b = posix.read(chan, 1 << 16)
        except InterruptedError:
            continue
        except BlockingIOError:
            _wait_in(sel, chan)
            continue
        if not b:
            _hand_back(st, 1, buf)
        buf += b
        if len(buf) < 4:
            continue
        n = int.from_bytes(buf[:4], 'big')
        if n < 1 or n > MAX_HOST_FRAME:
            _hand_back(st, 0, buf)
        if len(buf) < 4 + n:
            buf += _readx(sel, chan, 4 + n - len(buf))
            if len(buf) < 4 + n:
                _hand_back(st, 1, buf)
        break
    took = int(z.monotonic() * 1e9)
    p = buf[5:4 + n]
    if buf[4] != K_EVAL or len(p) < HEAD + 2 or not _fits(pre, _limits(p)):
        _hand_back(st, 0, buf)
    return p, took, buf[4 + n:]


def _readx(sel, fd, n):
    """n bytes of fd, fewer at its end (a descriptor shared with the zygote
    may be non-blocking)."""
    parts = []
    while n > 0:
        try:
            b = posix.read(fd, n)
        except InterruptedError:
            continue
        except BlockingIOError:
            _wait_in(sel, fd)
            continue
        if not b:
            break
        parts.append(b)
        n -= len(b)
    return b''.join(parts)


def _wait_in(sel, fd):
    """Wait until fd (non-blocking, shared with the zygote) can be read."""
    w = sel.poll()
    w.register(fd, sel.POLLIN)
    w.poll()


def _hand_back(st, eof, data):
    _send_frame(st, K_BACK, bytes((eof,)) + data)
    posix._exit(0)


def _take_request(req):
    """The request the zygote hands over on req (its length, then the EVAL
    payload, in one write: usually one read); exits when the zygote let the
    process go; None when it is malformed."""
    while True:
        try:
            b = posix.read(req, 1 << 16)
            break
        except InterruptedError:
            continue
    if not b:
        posix._exit(0)  # the zygote let it go
    if len(b) < 4:
        more = _readn(posix.read, req, 4 - len(b))
        if more is None:
            return None
        b += more
    n = int.from_bytes(b[:4], 'big')
    if n > MAX_HOST_FRAME:
        return None
    payload = b[4:]
    if len(payload) < n:
        more = _readn(posix.read, req, n - len(payload))
        if more is None:
            return None
        payload += more
    if len(payload) != n:
        return None
    return payload


def _single(z, st):
    _send_json(z, st, K_ZREADY, None, {'pid': posix.getpid(), 'fork': False, 'reason': '', 'single': True,
                                       'pool': 1})
    f = _read_frame(posix.read, z.fd)
    if f is None:
        raise SystemExit(0)
    if f[0] != K_EVAL or len(f[1]) < HEAD:
        raise SystemExit(3)
    p = f[1]
    cpu = int.from_bytes(p[12:16], 'big')
    mem = int.from_bytes(p[16:24], 'big')
    R = z.resource
    try:
        if cpu:
            R.setrlimit(R.RLIMIT_CPU, (cpu, cpu + 1))
        if mem:
            R.setrlimit(R.RLIMIT_AS, (mem, mem))
    except (OSError, ValueError) as e:
        z.fatal(z.fd, 'the limits of the evaluation cannot be set: %s' % (e,))
    if z.guard:
        try:
            _arm(z, st, z.fd)
        except BaseException as e:
            z.fatal(z.fd, 'arming the guard failed: %r' % (e,))
    _evaluate(z, st, p)
    posix._exit(0)


def _evaluate(z, st, p):
    _send_frame(st, *_outcome(z, st, p))


def _outcome(z, st, p):
    """(kind, payload) of the frame that ends the evaluation p."""
    eid = int.from_bytes(p[0:8], 'big')
    mem = int.from_bytes(p[16:24], 'big')
    mode = 'exec' if p[32] == 1 else 'eval'
    i = HEAD
    n = int.from_bytes(p[i:i + 2], 'big')
    profile = p[i + 2:i + 2 + n].decode('utf-8', 'replace')
    i += 2 + n
    n = int.from_bytes(p[i:i + 2], 'big')
    filename = p[i + 2:i + 2 + n].decode('utf-8', 'replace')
    i += 2 + n
    n = int.from_bytes(p[i:i + 4], 'big')
    src_b = p[i + 4:i + 4 + n]
    names_b = p[i + 4 + n:]
    del p
    st.cur = eid
    try:
        try:
            prof = z.profiles[profile]
        except KeyError:
            raise ValueError('unknown eval profile %r' % (profile,)) from None
        src = src_b.decode('utf-8')
        del src_b
        if names_b:
            try:
                names = st.Unpickler(st.io.BytesIO(names_b)).load()
            except Exception as e:
                raise TypeError('the names cannot be loaded in the sandbox: %s' % (e,)) from None
        else:
            names = {}
        del names_b
        pre = getattr(z, 'pre', None)
        if pre is not None and pre[0] == profile:
            z.pre = None
            r = pre[1](src, names, mode, filename)
        else:
            r = z.run(src, names, prof, mode, filename)
        del names
    except BaseException as e:
        return _exc(z, st, eid, e, mem=mem)
    if mode == 'exec':
        r = _data_names(st, r)
    elif type(r) in _SCALARS or (type(r) in (str, bytes) and len(r) <= 4096) \
            or (type(r) is int and r.bit_length() <= 32768):
        # A number, a short string, None...: its pickle at once (the same
        # bytes as through the bounded sink, without its Python-level calls).
        return K_RESULT, eid.to_bytes(8, 'big') + st.dumps(r, 5)
    sink = st.Sink()
    try:
        st.Pickler(sink, 5).dump(r)
    except st.TooLarge as e:
        return _exc(z, st, eid, None, 'result-too-large',
                    'the result is larger than the limit of the transport (more than %d bytes, limit %d)'
                    % (e.args[0], st.max_result))
    except BaseException as e:
        return _exc(z, st, eid, e, 'unpicklable', prefix='the result cannot be sent to the host: ', mem=mem)
    finally:
        del r
    sink.parts.insert(0, eid.to_bytes(8, 'big'))
    return K_RESULT, b''.join(sink.parts)


def _data_names(st, ns):
    """The names exec bound whose values can travel (a function or a class the
    code defined cannot: it is left out)."""
    if type(ns) is not dict:
        return ns
    out = {}
    for k, v in ns.items():
        if type(k) is not str or k.startswith('__'):
            continue
        try:
            st.Pickler(st.Sink(), 5).dump(v)
        except st.TooLarge:
            out[k] = v  # reported as too large with the whole result
        except BaseException:
            continue
        out[k] = v
    return out


def _exc(z, st, eid, e, kind='', message=None, prefix='', mem=0):
    """The EXC frame of exception e (or of message, when e is None)."""
    d = _exc_desc(st, e, kind, message or '', prefix)
    d['budget'], d['limit'], d['guard'] = '', 0, None
    if e is not None:
        if isinstance(e, MemoryError) and mem:
            d['budget'] = 'memory'
            d['limit'] = mem
        if not kind and z.describe is not None:
            try:
                g = z.describe(e)
            except BaseException:
                g = None
            if g is not None:
                d['module'], d['qualname'], d['message'] = str(g[0]), str(g[1]), _cut(str(g[2]), MAX_TEXT)
                d['guard'] = list(g[3])
        e.__traceback__ = None
    try:
        payload = _json(d)
    except BaseException:
        d['guard'] = None
        payload = _json(d)
    return K_EXC, eid.to_bytes(8, 'big') + payload.encode('utf-8', 'backslashreplace')
