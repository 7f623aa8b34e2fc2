# What the Call worker (worker.py) and the eval zygote (zygote.py) share: the
# frames of the channel to the host (4-byte big-endian length of kind+payload,
# 1-byte kind, payload), the JSON text of what they report, and the descriptor
# of an exception. boot.py runs this module in the namespace of either, just
# before it: these functions read that namespace's globals (posix, MAX_TEXT,
# MAX_HOST_FRAME) and are among its code objects (the layer's own frames). The
# JSON encoder (_json, to_json) follows the module's end: the embedding appends
# the one the eval guard shares (package internal/pyjson).


def _send_frame(st, kind, payload):
    """Send one frame on st.fd with st.write, under st.lock; the host gone ends
    the process (exit status 0)."""
    buf = (len(payload) + 1).to_bytes(4, 'big') + bytes((kind,)) + payload
    with st.lock:
        mv = memoryview(buf)
        while mv:
            try:
                k = st.write(st.fd, mv)
            except InterruptedError:
                continue
            except OSError:
                posix._exit(0)  # the other end is gone
            mv = mv[k:]


def _readn(read, fd, n):
    """n bytes read from fd with read; None at the end of the stream."""
    parts = []
    while n > 0:
        try:
            b = read(fd, min(n, 1 << 20))
        except InterruptedError:
            continue
        if not b:
            return None
        parts.append(b)
        n -= len(b)
    return b''.join(parts)


def _read_frame(read, fd):
    """(kind, payload) of the next frame on fd, None at the end; a length out of
    bounds raises SystemExit(3)."""
    h = _readn(read, fd, 5)
    if h is None:
        return None
    n = int.from_bytes(h[:4], 'big')
    if n < 1 or n > MAX_HOST_FRAME:
        raise SystemExit(3)
    p = _readn(read, fd, n - 1) if n > 1 else b''
    if p is None:
        return None
    return h[4], p


def _cut(s, n, tail=False):
    if len(s) <= n:
        return s
    if tail:
        return '...\n' + s[-n:]
    return s[:n] + '...'


def _exc_desc(st, e, kind, message=None, prefix=''):
    """The descriptor of exception e that an EXC frame carries (of message alone,
    as a SandBoxProtocolError, when e is None): module, qualname, message,
    traceback (without the layer's frames), the refusals it holds, base (not an
    Exception) and kind. The caller clears e's traceback once done with e."""
    if e is None:
        return {'module': 'pysandboxes', 'qualname': 'SandBoxProtocolError', 'message': message, 'traceback': '',
                'denials': [], 'base': False, 'kind': kind}
    t = type(e)
    try:
        msg = str(e)
    except BaseException:
        msg = '<exception str() failed>'
    tb = ''
    try:
        seen = set()
        x = e
        while x is not None and id(x) not in seen:
            seen.add(id(x))
            x.__traceback__ = st.trim(x.__traceback__, st.ours)
            x = x.__cause__ or x.__context__
        tb = ''.join(st.format_exception(t, e, e.__traceback__))
    except BaseException:
        pass
    try:
        denials = [s for s in st.denials(e) if type(s) is str and s.startswith('Rule')]
    except BaseException:
        denials = []
    d = {'module': str(getattr(t, '__module__', '') or ''), 'qualname': str(getattr(t, '__qualname__', t.__name__)),
         'message': _cut(prefix + msg, MAX_TEXT), 'traceback': _cut(tb, MAX_TEXT, True),
         'denials': [_cut(s, 4096) for s in denials[:100]], 'base': not isinstance(e, Exception), 'kind': kind}
    return d
