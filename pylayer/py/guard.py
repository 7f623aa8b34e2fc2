# The Python layer of pysandboxes: a PEP 578 audit hook that enforces the
# policy the host resolved (files, network, imports, sensitive functions, code
# given as a string) and, in learning mode, records instead of refusing.
#
# Hardening rules of this module (checked by the Go tests, see HOOK_PATH):
#   - no function on the hook's path reads a global name: what it needs is a
#     positional default, bound when this module is loaded (before any user code
#     runs), or an item of the state tuple S; so replacing a builtin, writing to
#     this module's globals or tampering with sys.modules changes no decision;
#   - the state S is a plain tuple of tuples, frozensets and mapping proxies; the
#     registered hook is a bound method of S (an audit hook cannot be removed);
#   - the only mutable object that decides (the cache of allowed paths) lives in
#     the hook's own defaults, and the hook deletes its locals before it raises;
#   - reading or setting __code__/__defaults__/__kwdefaults__ of the layer's
#     functions, and setting any attribute of its classes, is refused (CPython
#     audits those accesses).

import posix as _posix
import sys as _sys
import _stat

_MPT = type(type.__dict__)          # mappingproxy


class _M:
    def m(self):
        pass


_METHOD = type(_M().m)
_FUNC = type(_M.m)
del _M

_FSENC = _sys.getfilesystemencoding()
_JSON_TABLE = {i: '\\u%04x' % i for i in range(32)}
_JSON_TABLE[ord('"')] = '\\"'
_JSON_TABLE[ord('\\')] = '\\\\'
_JSON_TABLE = _MPT(_JSON_TABLE)
_GETFRAME = _sys._getframe

# S layout (indexes used literally below):
#  0 learning (bool)        1 exposes ((path, prefix, rw, raw, ref), ...) deepest first
#  2 implicit ((path, prefix, rw, why), ...)   3 ignores ((pattern, absolute, raw, ref), ...)
#  4 net rules ((allow, protos, dirs, ((fam, net, bits), ...), ((lo, hi), ...), raw, ref), ...)
#  5 pins {host: ((fam, int, text), ...)}      6 import-all (raw, ref) or None
#  7 imports {module: (raw, ref)}              8 api {qualname: (allowed, category, raw, ref)}
#  9 frame doors {(stdlib file, co_qualname): qualname}
# 10 stdlib roots (with '/')  11 the layer's code objects  12 send(kind, text)
# 13 exception classes (file, permission, connection, module, api)
# 14 the pid of the eval zygote (None otherwise)   15 api events {event: (qualname, ...)}
# 16 some ALLOW rule takes any address
# 17 id() of the layer's classes and functions   18 denials sent (set)   19 observations sent (set)


# ---------------------------------------------------------------- primitives

class _Punct(str):
    __slots__ = ()



def _js(o, _type=type, _str=str, _int=int, _bool=bool, _list=list, _tuple=tuple,
        _dict=dict, _table=_JSON_TABLE, _repr=repr, _reversed=reversed, _Punct=_Punct):
    """A small JSON encoder (json would cost the child its import); iterative."""
    out = []
    stack = [o]
    while stack:
        o = stack.pop()
        t = _type(o)
        if t is _Punct:
            out.append(o)
        elif t is _str:
            out.append('"' + o.translate(_table) + '"')
        elif t is _bool:
            out.append('true' if o else 'false')
        elif o is None:
            out.append('null')
        elif t is _int:
            out.append(_repr(o))
        elif t is _list or t is _tuple:
            out.append('[')
            stack.append(_Punct(']'))
            first = True
            items = []
            for x in o:
                if not first:
                    items.append(_Punct(','))
                items.append(x)
                first = False
            stack.extend(_reversed(items))
        elif t is _dict:
            out.append('{')
            stack.append(_Punct('}'))
            items = []
            first = True
            for k, v in o.items():
                if not first:
                    items.append(_Punct(','))
                items.append(_str(k))
                items.append(_Punct(':'))
                items.append(v)
                first = False
            stack.extend(_reversed(items))
        else:
            out.append('"' + _repr(o).translate(_table) + '"')
    return ''.join(out)


def _send(kind, text, _fd=-1, _write=_posix.write, _len=len, _bytes=bytes, _OSError=OSError):
    """Write one frame (kind, text) on the channel (descriptor bound by build)."""
    data = text.encode('utf-8', 'surrogatepass')
    buf = (_len(data) + 1).to_bytes(4, 'big') + _bytes((kind,)) + data
    while buf:
        try:
            k = _write(_fd, buf)
        except _OSError:
            return False
        buf = buf[k:]
    return True


def _tostr(p, _type=type, _str=str, _bytes=bytes, _isinstance=isinstance, _int=int, _fspath=_posix.fspath,
           _enc=_FSENC, _join=''.join, _bjoin=b''.join, _TypeError=TypeError):
    """The text of a path argument, or None for a descriptor or anything else.
    A str or bytes subclass is read through its buffer (its methods are not
    called); a path-like object is asked once (os.fspath)."""
    t = _type(p)
    if t is _str:
        return p
    if t is _bytes:
        return p.decode(_enc, 'surrogateescape')
    if _isinstance(p, _str):
        return _join((p,))
    if _isinstance(p, _bytes):
        return _bjoin((p,)).decode(_enc, 'surrogateescape')
    if _isinstance(p, _int):
        return None
    try:
        p = _fspath(p)
    except _TypeError:
        return None
    if _isinstance(p, _str):
        return _join((p,))
    if _isinstance(p, _bytes):
        return _bjoin((p,)).decode(_enc, 'surrogateescape')
    return None


def _realpath(path, _lstat=_posix.lstat, _readlink=_posix.readlink, _islnk=_stat.S_ISLNK,
              _OSError=OSError):
    """Canonical form of an absolute path, as os.path.realpath (non-strict):
    symbolic links resolved, missing components kept as written."""
    pending = path.split('/')
    pending.reverse()
    res = ''
    links = 0
    missing = False
    while pending:
        name = pending.pop()
        if name == '' or name == '.':
            continue
        if name == '..':
            i = res.rfind('/')
            res = res[:i] if i > 0 else ''
            continue
        new = res + '/' + name
        if missing:
            res = new
            continue
        try:
            st = _lstat(new)
        except _OSError:
            missing = True
            res = new
            continue
        if not _islnk(st.st_mode):
            res = new
            continue
        links += 1
        if links > 40:
            res = new
            missing = True
            continue
        target = _readlink(new)
        if target.startswith('/'):
            res = ''
        t = target.split('/')
        t.reverse()
        pending.extend(t)
    return res or '/'


def _fdpath(fd, _readlink=_posix.readlink, _str=str, _OSError=OSError):
    """The path of an open descriptor, through /proc/self/fd (None when unknown)."""
    try:
        p = _readlink('/proc/self/fd/' + _str(fd))
    except _OSError:
        return None
    if not p.startswith('/') or p.endswith(' (deleted)'):
        return None
    return p


def _abspath(p, dir_fd=None, _getcwd=_posix.getcwd, _type=type, _int=int, _fdpath=_fdpath):
    """Absolute path of p (relative to dir_fd when given, resolved through
    /proc/self/fd), or None when it cannot be known."""
    if p.startswith('/'):
        return p
    if dir_fd is None or dir_fd == -1 or dir_fd == -100:
        base = _getcwd()
    else:
        if _type(dir_fd) is not _int:
            return None
        base = _fdpath(dir_fd)
        if base is None:
            return None
    if base == '/':
        return '/' + p
    return base + '/' + p


def _gomatch_class(pat, i, ch, _len=len):
    """Match ch against the class starting at pat[i] == '['. Returns
    (matched, index after ']'), index -1 for a malformed class."""
    n = _len(pat)
    i += 1
    neg = False
    if i < n and pat[i] == '^':
        neg = True
        i += 1
    matched = False
    first = True
    while True:
        if i >= n:
            return False, -1
        if pat[i] == ']' and not first:
            return matched != neg, i + 1
        first = False
        lo = pat[i]
        if lo == '\\':
            i += 1
            if i >= n:
                return False, -1
            lo = pat[i]
        i += 1
        hi = lo
        if i + 1 < n and pat[i] == '-' and pat[i + 1] != ']':
            hi = pat[i + 1]
            i += 2
            if hi == '\\':
                if i >= n:
                    return False, -1
                hi = pat[i]
                i += 1
        if lo <= ch <= hi:
            matched = True


def _gomatch(pat, name, _len=len, _cls=_gomatch_class):
    """Go's path.Match, as the host judges ignore= rules: '*' and '?' never
    match '/'."""
    px = nx = 0
    sp = -1
    sn = 0
    lp = _len(pat)
    ln = _len(name)
    while nx < ln or px < lp:
        if px < lp:
            c = pat[px]
            if c == '*':
                sp = px
                sn = nx
                px += 1
                continue
            if nx < ln:
                ch = name[nx]
                if c == '?':
                    if ch != '/':
                        px += 1
                        nx += 1
                        continue
                elif c == '[':
                    if ch != '/':
                        ok, np = _cls(pat, px, ch)
                        if np < 0:
                            return False
                        if ok:
                            px = np
                            nx += 1
                            continue
                elif c == '\\' and px + 1 < lp:
                    if pat[px + 1] == ch:
                        px += 2
                        nx += 1
                        continue
                elif c == ch:
                    px += 1
                    nx += 1
                    continue
        if sp >= 0 and sn < ln and name[sn] != '/':
            sn += 1
            px = sp + 1
            nx = sn
            continue
        return False
    return True


def _ignored(S, path, _match=_gomatch, _len=len):
    """The ignore= rule hiding path, or None (policy.Ignored's semantics)."""
    ignores = S[3]
    if not ignores:
        return None
    root = ''
    for e in S[1]:
        if path == e[0] or path.startswith(e[1]):
            root = e[0]
            break
    for ig in ignores:
        pat = ig[0]
        q = path
        while True:
            if ig[1]:
                if _match(pat, q):
                    return ig
            elif root == '' or _len(q) > _len(root):
                if _match(pat, q[q.rfind('/') + 1:]):
                    return ig
            if q == '/' or q == '' or (root != '' and _len(q) <= _len(root) and not ig[1]):
                break
            i = q.rfind('/')
            q = q[:i] if i > 0 else '/'
    return None


# ---------------------------------------------------------------- reporting

def _deny(S, kind, cls, msg, target, rule, ref, obs, errno=None, quiet=False, _js=_js, _len=len):
    """Report a refusal: in learning mode, record obs and allow (None); else send
    the denial to the host and return the exception to raise. quiet: neither
    recorded nor reported (the import system probing a directory)."""
    if quiet:
        if S[0]:
            return None
        return cls(errno, msg)
    if S[0]:
        if obs is not None:
            key = _js(obs)
            sent = S[19]
            if key not in sent and _len(sent) < 200000:
                sent.add(key)
                S[12](18, key)
        return None
    sent = S[18]
    key = cls.__name__ + msg
    if key not in sent and _len(sent) < 1000:
        sent.add(key)
        S[12](17, _js({'kind': kind, 'exc': cls.__name__, 'msg': msg, 'target': target,
                       'rule': rule or '', 'ref': ref or ''}))
    if errno is not None:
        return cls(errno, msg)
    return cls(msg)


# ---------------------------------------------------------------- files

def _file_decide(S, canon, write, shown, record_dir, quiet=False, _ignored=_ignored, _deny=_deny):
    """None when the access is allowed, else the exception (None in learning
    mode, after recording). canon is canonical, shown the absolute spelling."""
    ig = _ignored(S, canon)
    if ig is None and shown != canon:
        ig = _ignored(S, shown)
    if ig is not None:
        return _deny(S, 'file', S[13][0], "Access to '%s' is ignored by rule '%s' from %s" % (shown, ig[2], ig[3]),
                     shown, ig[2], ig[3], {'files': [[shown, write, record_dir]]}, 2, quiet)
    for e in S[1]:
        if canon == e[0] or canon.startswith(e[1]):
            if write and not e[2]:
                for m in S[2]:
                    if m[2] and (canon == m[0] or canon.startswith(m[1])):
                        return None
                return _deny(S, 'file', S[13][1], "Cannot write to '%s'. Rule '%s' from %s" % (shown, e[3], e[4]),
                             shown, e[3], e[4], {'files': [[shown, write, record_dir]]}, 13, quiet)
            return None
    for m in S[2]:
        if canon == m[0] or canon.startswith(m[1]):
            if write and not m[2]:
                return _deny(S, 'file', S[13][1],
                             "Cannot write to '%s'. DENIED by implicit default policy (%s is read-only)." % (shown, m[3]),
                             shown, '', '', {'files': [[shown, write, record_dir]]}, 13, quiet)
            return None
    return _deny(S, 'file', S[13][0], "Access to '%s' must be accepted by a rule." % shown, shown, '', '',
                 {'files': [[shown, write, record_dir]]}, 2, quiet)


def _check_path(S, p, write, dir_fd=None, record_dir=False, quiet=False, _tostr=_tostr, _abspath=_abspath,
                _realpath=_realpath, _decide=_file_decide, _deny=_deny):
    s = _tostr(p)
    if s is None or s == '':
        return None  # a descriptor, or the OS call fails by itself
    a = _abspath(s, dir_fd)
    if a is None:
        return _deny(S, 'file', S[13][0],
                     "Access to '%s' must be accepted by a rule (its dir_fd cannot be resolved)." % s, s, '', '', None, 2)
    return _decide(S, _realpath(a), write, a, record_dir, quiet)


def _dir_of(a):
    i = a.rfind('/')
    return a[:i] if i > 0 else '/'


# ---------------------------------------------------------------- network

def _parse_ip(s, _int=int, _len=len, _ValueError=ValueError):
    """(family, int) of an IPv4 or IPv6 address text; an IPv4-mapped IPv6 address
    is returned as IPv4. None when s is not an address."""
    i = s.find('%')
    if i >= 0:
        s = s[:i]
    if ':' not in s:
        parts = s.split('.')
        if _len(parts) != 4:
            return None
        v = 0
        for x in parts:
            if not x.isdigit() or _len(x) > 3 or not x.isascii():
                return None
            n = _int(x)
            if n > 255:
                return None
            v = v * 256 + n
        return (4, v)
    tail4 = 0
    if '.' in s:
        j = s.rfind(':')
        parts = s[j + 1:].split('.')
        if _len(parts) != 4:
            return None
        for x in parts:
            if not x.isdigit() or _len(x) > 3 or not x.isascii() or _int(x) > 255:
                return None
            tail4 = tail4 * 256 + _int(x)
        s = s[:j + 1] + '0:0'
    if s.count('::') > 1:
        return None
    if '::' in s:
        a, b = s.split('::')
        left = a.split(':') if a else []
        right = b.split(':') if b else []
        fill = 8 - _len(left) - _len(right)
        if fill < 1:
            return None
        groups = left + ['0'] * fill + right
    else:
        groups = s.split(':')
    if _len(groups) != 8:
        return None
    v = 0
    for g in groups:
        if g == '' or _len(g) > 4 or not g.isascii():
            return None
        try:
            v = v * 65536 + _int(g, 16)
        except _ValueError:
            return None
    v |= tail4
    if v >> 32 == 0xffff:
        return (4, v & 0xffffffff)
    return (6, v)


def _show_ip(ip, _range=range):
    """The usual text of an address (IPv6 with its longest run of zeros as ::)."""
    v = ip[1]
    if ip[0] == 4:
        return '%d.%d.%d.%d' % (v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255)
    g = [(v >> (112 - 16 * k)) & 0xffff for k in _range(8)]
    best = bl = -1
    i = 0
    while i < 8:
        if g[i] == 0:
            j = i
            while j < 8 and g[j] == 0:
                j += 1
            if j - i > bl and j - i > 1:
                best, bl = i, j - i
            i = j
        else:
            i += 1
    parts = ['%x' % x for x in g]
    if best < 0:
        return ':'.join(parts)
    return ':'.join(parts[:best]) + '::' + ':'.join(parts[best + bl:])


def _net_decide(S, proto, ip, port, direction):
    """(allowed, rule): every DENY rule first, then the first ALLOW rule."""
    for allow in (False, True):
        for r in S[4]:
            if r[0] != allow or not (r[1] & proto) or not (r[2] & direction):
                continue
            inport = False
            for lo, hi in r[4]:
                if lo <= port <= hi:
                    inport = True
                    break
            if not inport:
                continue
            for fam, net, bits in r[3]:
                if fam == ip[0]:
                    w = 32 if fam == 4 else 128
                    if bits == 0 or (ip[1] >> (w - bits)) == (net >> (w - bits)):
                        return allow, r
    return False, None


def _net_refuse(S, proto, direction, host, ip, port, rule, _show=_show_ip, _deny=_deny):
    shown = host if host else _show(ip)
    verb = 'connection to' if direction == 2 else 'bind to'
    if rule is None:
        msg = "Guard network %s '[%s]:%d' DENIED by implicit default policy." % (verb, shown, port)
        raw = ref = ''
    else:
        msg = "%s [%s]:%d DENIED by explicit rule '%s' from %s" % (verb.capitalize(), shown, port, rule[5], rule[6])
        raw, ref = rule[5], rule[6]
    obs = None
    if ip is not None:
        obs = {'net': [['tcp' if proto == 1 else 'udp', 'in' if direction == 1 else 'out', host or '', _show(ip), port]]}
    return _deny(S, 'network', S[13][2], msg, '[%s]:%d' % (shown, port), raw, ref, obs, 111)


def _net_check(S, proto, direction, host, port, _parse=_parse_ip, _decide=_net_decide, _refuse=_net_refuse):
    """Check one operation addressed to host (an address or a name) and port. A
    name is allowed only when every address pinned for it is."""
    ip = _parse(host)
    if ip is not None:
        ok, rule = _decide(S, proto, ip, port, direction)
        if ok:
            return None
        return _refuse(S, proto, direction, '', ip, port, rule)
    pinned = S[5].get(host.lower().rstrip('.'))
    if not pinned:
        # Not pinned: the C resolver would pick the address; it cannot be judged.
        return _refuse(S, proto, direction, host, None, port, None)
    for fam, v, text in pinned:
        ok, rule = _decide(S, proto, (fam, v), port, direction)
        if not ok:
            return _refuse(S, proto, direction, host, (fam, v), port, rule)
    return None


# ---------------------------------------------------------------- frames and API

def _frame_kind(S, code, _len=len):
    """'ours', 'ambient' (stdlib, site-packages, <frozen ...>) or 'user', by the
    code's file name (never by __name__, which the globals may spoof)."""
    if code in S[11]:
        return 'ours'
    fn = code.co_filename
    if fn.startswith('<'):
        if fn.startswith('<frozen '):
            return 'ambient'
        return 'user'
    for d in S[10]:
        if fn.startswith(d):
            if '/site-packages/' in fn[_len(d):]:
                return 'ambient'
            return 'ambient'
    if '/site-packages/' in fn or '/dist-packages/' in fn:
        return 'ambient'
    return 'user'


def _stdlib_rel(S, fn, _len=len):
    for d in S[10]:
        if fn.startswith(d):
            return fn[_len(d):]
    return None


def _api_refuse(S, q, v, _deny=_deny):
    cat = v[1]
    msg = ("%s() is denied by the API guard (category: %s).\n"
           "Add `python-api=ALLOW:%s` for this function only, or `python-api=ALLOW:%s` for the whole category.") % (q, cat, q, cat)
    if v[2]:
        msg += "\nDENIED by explicit rule '%s' from %s." % (v[2], v[3])
    else:
        msg += "\nDENIED by implicit default policy."
    e = _deny(S, "api", S[13][4], msg, q, v[2], v[3], {"api": [q]})
    if e is not None:
        e.qualname = q
        e.category = cat
    return e


def _api_chain(S, frame, quals, _kind=_frame_kind, _rel=_stdlib_rel, _refuse=_api_refuse):
    """Judge a call: the registered functions found on the stack from frame
    outward (stdlib frames, outermost first), then quals (the event's own doors).
    The first denied door is refused. A stdlib or site-packages module being
    initialised (its <module> frame on the way) is ambient: allowed."""
    doors = []
    f = frame
    while f is not None:
        code = f.f_code
        k = _kind(S, code)
        if k == 'ours':
            f = f.f_back
            continue
        if k != 'ambient':
            break
        if code.co_name == '<module>':
            return None
        rel = _rel(S, code.co_filename)
        if rel is not None:
            q = S[9].get((rel, code.co_qualname))
            if q is not None and q not in doors:
                doors.append(q)
        f = f.f_back
    del f
    doors.reverse()
    for q in quals:
        if q not in doors:
            doors.append(q)
    learned = None
    for q in doors:
        v = S[8].get(q)
        if v is not None and not v[0]:
            e = _refuse(S, q, v)
            if e is not None:
                return e
    return learned


def _gate(S, qual, _getframe=_GETFRAME, _chain=_api_chain):
    """The check of a patched function (bound to S): raises when qual, or a door
    outside it, is denied."""
    f = _getframe(2)
    err = _chain(S, f, (qual,))
    del f, S, _chain, _getframe
    if err is not None:
        raise err


# ---------------------------------------------------------------- handlers
# A handler takes (S, event, args, cache) and returns None or the exception.

def _h_open(S, event, args, cache, _type=type, _str=str, _int=int, _len=len, _check=_check_path,
            _tostr=_tostr, _getframe=_GETFRAME, _kind=_frame_kind, _deny=_deny):
    p = args[0]
    mode = args[1]
    flags = args[2]
    if _type(flags) is _int:
        # O_WRONLY|O_RDWR, O_CREAT|O_TRUNC, O_APPEND
        write = (flags & 0o3) != 0 or (flags & 0o1100) != 0 or (flags & 0o2000) != 0
    elif mode is not None:
        write = 'w' in mode or 'a' in mode or 'x' in mode or '+' in mode
    else:
        write = False
    if _type(p) is _str and p.startswith('/'):
        key = (p, write)
        if key in cache:
            return None
        err = _check(S, p, write)
        if err is None and not S[0]:
            if _len(cache) > 4096:
                cache.clear()
            cache[key] = None
        return err
    if mode is None and _type(p) is not _int:
        s = _tostr(p)
        if s is not None and not s.startswith('/'):
            # The original os.open with a relative path: its dir_fd is unknown (the
            # patched os.open always passes an absolute path).
            f = _getframe(2)
            k = _kind(S, f.f_code)
            del f
            if k == 'user':
                return _deny(S, 'file', S[13][0],
                             "Access to '%s' must be accepted by a rule (a relative os.open with an unknown dir_fd cannot be checked)." % s,
                             s, '', '', None, 2)
    return _check(S, p, write)


def _h_list(S, event, args, cache, _type=type, _int=int, _fdpath=_fdpath, _decide=_file_decide,
            _realpath=_realpath, _check=_check_path, _getframe=_GETFRAME):
    p = args[0]
    if p is None:
        p = '.'
    if _type(p) is _int:
        a = _fdpath(p)
        if a is None:
            return None
        return _decide(S, _realpath(a), False, a, True)
    # The import system lists every sys.path entry: refused there too, but not
    # reported nor learned (a module it then opens is).
    f = _getframe(2)
    quiet = f is not None and f.f_code.co_filename == '<frozen importlib._bootstrap_external>'
    del f
    return _check(S, p, False, None, True, quiet)


def _h_xattr_read(S, event, args, cache, _check=_check_path):
    return _check(S, args[0], False)


def _h_write1(S, event, args, cache, _check=_check_path):
    # os.remove, os.rmdir (path, dir_fd); os.chmod (path, mode, dir_fd); os.chown
    # (path, uid, gid, dir_fd); os.utime (path, times, ns, dir_fd); os.setxattr,
    # os.removexattr, os.truncate (path, ...)
    cache.clear()
    dir_fd = None
    if event == 'os.remove' or event == 'os.rmdir':
        dir_fd = args[1]
    elif event == 'os.chmod':
        dir_fd = args[2]
    elif event == 'os.chown' or event == 'os.utime':
        dir_fd = args[3]
    return _check(S, args[0], True, dir_fd)


def _h_mkdir(S, event, args, cache, _check=_check_path):
    # (path, mode, dir_fd): a write in the parent directory.
    cache.clear()
    return _check(S, args[0], True, args[2])


def _h_two(S, event, args, cache, _check=_check_path):
    # os.rename, os.link (src, dst, src_dir_fd, dst_dir_fd): both sides write (a
    # hard link would let the file be written through the new name).
    cache.clear()
    err = _check(S, args[0], True, args[2])
    if err is None:
        err = _check(S, args[1], True, args[3])
    return err


def _h_symlink(S, event, args, cache, _check=_check_path, _tostr=_tostr, _abspath=_abspath, _dir_of=_dir_of):
    # (src, dst, dir_fd): dst is created; the target must be visible from dst.
    cache.clear()
    err = _check(S, args[1], True, args[2])
    if err is not None:
        return err
    src = _tostr(args[0])
    dst = _tostr(args[1])
    if src is None or dst is None:
        return None
    if not src.startswith('/'):
        d = _abspath(dst, args[2])
        if d is None:
            return None
        src = _dir_of(d) + '/' + src
    return _check(S, src, False)


def _h_chdir(S, event, args, cache, _type=type, _int=int, _fdpath=_fdpath, _decide=_file_decide,
             _realpath=_realpath, _check=_check_path):
    p = args[0]
    if _type(p) is _int:
        a = _fdpath(p)
        if a is None:
            return None
        return _decide(S, _realpath(a), False, a, True)
    return _check(S, p, False, None, True)


def _h_import(S, event, args, cache, _type=type, _str=str, _getframe=_GETFRAME, _kind=_frame_kind,
              _deny=_deny):
    name = args[0]
    if _type(name) is not _str:
        return None
    top = name.split('.')[0]
    if top == 'pysandboxes' or top == '':
        return None
    if S[6] is not None or top in S[7]:
        return None
    f = _getframe(2)
    k = 'user' if f is None else _kind(S, f.f_code)
    del f
    if k == 'ours':
        return None
    e = _deny(S, 'import', S[13][3], "Module named '%s' is not allowed by a rule" % top, top, '', '',
              {'imports': [top]})
    if e is not None:
        e.name = name
    return e


def _h_api(S, event, args, cache, _getframe=_GETFRAME, _chain=_api_chain, _getpid=_posix.getpid):
    quals = S[15].get(event)
    if quals is None:
        return None
    if S[14] is not None and _getpid() in S[14]:
        # The eval zygote itself, which runs only the layer's code: it forks the
        # processes of the evaluations and kills them; and an evaluation's process
        # while the layer's code sets its limits, before it evaluates anything.
        # Each of them has another pid, and is judged otherwise.
        return None
    if event in ('subprocess.Popen', 'os.exec', 'os.posix_spawn', 'os.fork', 'os.forkpty', 'os.system'):
        cache.clear()  # another process may change the file system
    f = _getframe(2)
    err = _chain(S, f, quals)
    del f
    return err


def _h_frame_api(S, event, args, cache, _getframe=_GETFRAME, _kind=_frame_kind, _rel=_stdlib_rel,
                 _chain=_api_chain):
    # sys._getframe / sys._getframemodulename. The stdlib and site-packages use
    # them for logging, warnings, typing, enum, namedtuple: allowed, except
    # inspect's currentframe, stack and trace, which hand frames to their caller.
    if event == 'sys._getframe':
        fr = args[0]
        if fr is not None and fr.f_code in S[11]:
            return None
    f = _getframe(2)
    if f is None:
        return None
    code = f.f_code
    k = _kind(S, code)
    if k == 'ours' or (k == 'ambient' and _rel(S, code.co_filename) != 'inspect.py'):
        del f, code
        return None
    err = _chain(S, f, S[15].get(event))
    del f, code
    return err


def _h_getattr(S, event, args, cache, _capture=frozenset(('tb_frame', 'gi_frame', 'cr_frame', 'ag_frame')),
               _own=frozenset(('__code__', '__defaults__', '__kwdefaults__')), _getframe=_GETFRAME,
               _kind=_frame_kind, _rel=_stdlib_rel, _chain=_api_chain, _deny=_deny, _id=id):
    name = args[1]
    if name in _own:
        if _id(args[0]) not in S[17]:
            return None
        f = _getframe(2)
        k = 'user' if f is None else _kind(S, f.f_code)
        del f
        if k == 'ours':
            return None
        return _deny(S, 'api', S[13][1],
                     "Reading the sandbox's own functions is DENIED by implicit default policy.", name, '', '', None, 1)
    if name not in _capture:
        return None
    f = _getframe(2)
    if f is None:
        return None
    code = f.f_code
    k = _kind(S, code)
    if k == 'ours' or (k == 'ambient' and _rel(S, code.co_filename) != 'inspect.py'):
        del f, code
        return None
    err = _chain(S, f, ('sys._getframe',))
    del f, code
    return err


def _h_setattr(S, event, args, cache, _deny=_deny, _id=id):
    if _id(args[0]) in S[17]:
        return _deny(S, 'api', S[13][1],
                     "Modifying the sandbox's own objects is DENIED by implicit default policy.", args[1], '', '', None, 1)
    return None


def _h_code(S, event, args, cache, _getframe=_GETFRAME, _kind=_frame_kind, _refuse=_api_refuse):
    # exec / compile reached without the patched builtins (restored originals):
    # refused for user code unless python-api allows them.
    f = _getframe(2)
    if f is None:
        return None
    k = _kind(S, f.f_code)
    del f
    if k != 'user':
        return None
    q = 'builtins.exec' if event == 'exec' else 'builtins.compile'
    v = S[8].get(q)
    if v is None or v[0]:
        return None
    return _refuse(S, q, v)


def _h_sock(S, event, args, cache, _type=type, _tuple=tuple, _int=int, _len=len, _tostr=_tostr,
            _check=_check_path, _net=_net_check, _deny=_deny, _Exception=Exception):
    sock = args[0]
    addr = args[1]
    try:
        # The family and type as the C socket type itself reports them (a
        # subclass cannot lie about them).
        base = _type(sock).__mro__[-2]
        fam = base.__dict__['family'].__get__(sock)
        typ = base.__dict__['type'].__get__(sock) & 0xf
    except _Exception:
        return None
    if fam == 1:  # AF_UNIX: the socket's path follows the file rules, and needs rw
        s = _tostr(addr)
        if s is None:
            return None
        if s == '' or s.startswith('\0'):
            return _deny(S, 'network', S[13][2],
                         "Guard network connection to abstract Unix socket '%s' DENIED by implicit default policy." % s[1:],
                         s, '', '', None, 111)
        return _check(S, s, True)
    if fam != 2 and fam != 10:
        return None
    if _type(addr) is not _tuple or _len(addr) < 2:
        return None
    host = _tostr(addr[0])
    port = addr[1]
    if host is None or _type(port) is not _int:
        return None
    proto = 1 if typ == 1 else 2 if typ == 2 else 0
    if proto == 0:
        return None
    direction = 1 if event == 'socket.bind' else 2
    if host == '':
        host = '0.0.0.0' if fam == 2 else '::'
    elif host == '<broadcast>':
        host = '255.255.255.255'
    return _net(S, proto, direction, host, port)


def _h_resolve(S, event, args, cache, _tostr=_tostr, _parse=_parse_ip, _type=type, _int=int,
               _refuse=_net_refuse):
    # A name no rule can allow is refused before any query leaves; a pinned name
    # is answered by the patched resolver.
    host = args[0]
    if S[0] or host is None or S[16]:
        return None
    h = _tostr(host)
    if h is None or _parse(h) is not None:
        return None
    key = h.lower().rstrip('.')
    if key in S[5] or key == 'localhost' or key == '':
        return None
    port = args[1] if event == 'socket.getaddrinfo' else 0
    if _type(port) is not _int:
        port = 0
    return _refuse(S, 1, 2, h, None, port, None)


def _hook(S, event, args, _get=None, _cache=None):
    """The audit hook (bound to S): one lookup for the events it ignores."""
    h = _get(event)
    if h is None:
        return
    err = h(S, event, args, _cache)
    if err is not None:
        del S, args, h, _get, _cache
        raise err


HANDLERS = {
    'open': _h_open,
    'os.listdir': _h_list, 'os.scandir': _h_list,
    'os.chdir': _h_chdir,
    'os.listxattr': _h_xattr_read, 'os.getxattr': _h_xattr_read,
    'os.remove': _h_write1, 'os.rmdir': _h_write1, 'os.chmod': _h_write1, 'os.chown': _h_write1,
    'os.utime': _h_write1, 'os.setxattr': _h_write1, 'os.removexattr': _h_write1, 'os.truncate': _h_write1,
    'os.mkdir': _h_mkdir,
    'os.rename': _h_two, 'os.link': _h_two,
    'os.symlink': _h_symlink,
    'import': _h_import,
    'exec': _h_code, 'compile': _h_code,
    'socket.connect': _h_sock, 'socket.bind': _h_sock, 'socket.sendto': _h_sock, 'socket.sendmsg': _h_sock,
    'socket.getaddrinfo': _h_resolve, 'socket.gethostbyname': _h_resolve,
    'sys._getframe': _h_frame_api, 'sys._getframemodulename': _h_frame_api,
    'object.__getattr__': _h_getattr,
    'object.__setattr__': _h_setattr, 'object.__delattr__': _h_setattr,
}

# Events that are the door of registered functions: event -> the registered names
# it judges (after the doors found on the stack).
API_EVENTS = {
    'os.system': ('os.system',),
    'os.exec': ('os.execv',),
    'os.posix_spawn': ('os.posix_spawn',),
    'os.fork': ('os.fork',),
    'os.forkpty': ('os.forkpty',),
    'subprocess.Popen': ('subprocess.Popen', '_posixsubprocess.fork_exec'),
    'pty.spawn': ('pty.spawn',),
    'os.kill': ('os.kill',),
    'os.killpg': ('os.killpg',),
    'signal.pthread_kill': ('signal.pthread_kill',),
    'resource.setrlimit': ('resource.setrlimit',),
    'resource.prlimit': ('resource.prlimit',),
    '_thread.start_new_thread': ('_thread.start_new_thread',),
    '_thread.start_joinable_thread': ('_thread.start_joinable_thread',),
    'ctypes.dlopen': ('ctypes.CDLL',),
    'ctypes.string_at': ('ctypes.string_at',),
    'ctypes.wstring_at': ('ctypes.wstring_at',),
    # Any foreign call from user code is native code (ctypes.pythonapi included);
    # ctypes' own import-time calls are module initialisation (ambient). CPython
    # raises no event for an ordinary foreign call, but the first look-up of each
    # symbol (libc.getpid, ctypes.pythonapi.Py_IsInitialized...) raises ctypes.dlsym:
    # that is where a native call is judged.
    'ctypes.call_function': ('ctypes.CDLL',),
    'ctypes.dlsym': ('ctypes.CDLL',),
    # Reading memory at an arbitrary address (c_int.from_address...) is what
    # ctypes.cast gives: judged as it. (ctypes.memmove/memset raise no event: a
    # program allowed to import ctypes can still move raw memory with them.)
    'ctypes.cdata': ('ctypes.cast',),
    'sys._getframe': ('sys._getframe',),
    'sys._getframemodulename': ('sys._getframemodulename',),
    'sys._current_frames': ('sys._current_frames',),
    'sys._current_exceptions': ('sys._current_exceptions',),
    'sys.settrace': ('sys.settrace',),
    'sys.setprofile': ('sys.setprofile',),
    'sys.addaudithook': ('sys.addaudithook',),
    'sys.remote_exec': ('sys.remote_exec',),
    'gc.get_objects': ('gc.get_objects',),
    'gc.get_referrers': ('gc.get_referrers',),
    'gc.get_referents': ('gc.get_referents',),
    'pickle.find_class': ('pickle.loads',),
    'cpython.PyInterpreterState_New': ('_interpreters.create',),
}
for _e in API_EVENTS:
    if _e not in HANDLERS:
        HANDLERS[_e] = _h_api
del _e

# Registered functions written in Python in the stdlib, found on the stack:
# (file relative to the stdlib, co_qualname) -> registered name.
FRAME_DOORS = {
    ('os.py', 'popen'): 'os.popen',
    ('os.py', 'execl'): 'os.execl', ('os.py', 'execle'): 'os.execle', ('os.py', 'execlp'): 'os.execlp',
    ('os.py', 'execlpe'): 'os.execlpe', ('os.py', 'execvp'): 'os.execvp', ('os.py', 'execvpe'): 'os.execvpe',
    ('os.py', 'spawnv'): 'os.spawnv', ('os.py', 'spawnve'): 'os.spawnve', ('os.py', 'spawnvp'): 'os.spawnvp',
    ('os.py', 'spawnvpe'): 'os.spawnvpe', ('os.py', 'spawnl'): 'os.spawnl', ('os.py', 'spawnle'): 'os.spawnle',
    ('os.py', 'spawnlp'): 'os.spawnlp', ('os.py', 'spawnlpe'): 'os.spawnlpe',
    ('subprocess.py', 'Popen.__init__'): 'subprocess.Popen', ('subprocess.py', 'run'): 'subprocess.run',
    ('subprocess.py', 'call'): 'subprocess.call', ('subprocess.py', 'check_call'): 'subprocess.check_call',
    ('subprocess.py', 'check_output'): 'subprocess.check_output',
    ('subprocess.py', 'getoutput'): 'subprocess.getoutput',
    ('subprocess.py', 'getstatusoutput'): 'subprocess.getstatusoutput',
    ('pty.py', 'spawn'): 'pty.spawn', ('pty.py', 'fork'): 'pty.fork',
    ('multiprocessing/process.py', 'BaseProcess.start'): 'multiprocessing.Process.start',
    ('threading.py', 'Thread.start'): 'threading.Thread.start',
    ('threading.py', 'settrace'): 'threading.settrace', ('threading.py', 'setprofile'): 'threading.setprofile',
    ('threading.py', 'settrace_all_threads'): 'threading.settrace_all_threads',
    ('threading.py', 'setprofile_all_threads'): 'threading.setprofile_all_threads',
    ('ctypes/__init__.py', 'CDLL.__init__'): 'ctypes.CDLL', ('ctypes/__init__.py', 'cast'): 'ctypes.cast',
    ('ctypes/__init__.py', 'string_at'): 'ctypes.string_at', ('ctypes/__init__.py', 'wstring_at'): 'ctypes.wstring_at',
    ('inspect.py', 'currentframe'): 'inspect.currentframe', ('inspect.py', 'stack'): 'inspect.stack',
    ('inspect.py', 'trace'): 'inspect.trace',
    ('importlib/__init__.py', 'reload'): 'importlib.reload',
    ('pickle.py', '_loads'): 'pickle._loads', ('pickle.py', '_load'): 'pickle._load',
    ('pickle.py', '_Unpickler.__init__'): 'pickle._Unpickler',
    ('concurrent/interpreters/__init__.py', 'create'): 'concurrent.interpreters.create',
}

# Functions without an audit event, patched where they live: module -> {attribute:
# registered name}. Modules already loaded are patched when the guard is armed,
# the others when they are imported (a finder first on sys.meta_path).
_OS_PATCHED = ('nice', 'setpriority', 'abort', 'setsid', 'setpgid', 'setpgrp', 'setuid', 'setgid', 'seteuid',
               'setegid', 'setreuid', 'setregid', 'setgroups', 'umask', 'setresuid', 'setresgid', 'initgroups',
               'unshare', 'setns')
PATCHES = {
    'posix': {n: 'os.' + n for n in _OS_PATCHED},
    'os': {n: 'os.' + n for n in _OS_PATCHED},
    '_signal': {'alarm': 'signal.alarm', 'setitimer': 'signal.setitimer', 'raise_signal': 'signal.raise_signal'},
    'signal': {'alarm': 'signal.alarm', 'setitimer': 'signal.setitimer', 'raise_signal': 'signal.raise_signal'},
    # No _thread audit event before 3.13 (start_joinable_thread has one from 3.13).
    '_thread': {'interrupt_main': '_thread.interrupt_main', 'stack_size': 'threading.stack_size',
                'start_new_thread': '_thread.start_new_thread', 'start_new': '_thread.start_new_thread'},
    '_posixsubprocess': {'fork_exec': '_posixsubprocess.fork_exec'},
    'faulthandler': {'enable': 'faulthandler.enable'},
    'importlib': {'reload': 'importlib.reload'},
    'pickle': {'loads': 'pickle.loads', 'load': 'pickle.load'},
    '_pickle': {'loads': 'pickle.loads', 'load': 'pickle.load'},
    'threading': {'stack_size': 'threading.stack_size', '_start_new_thread': '_thread.start_new_thread'},
}

# The functions on the hook's path: none of them may read a global name.
HOOK_PATH = ('_js', '_send', '_tostr', '_realpath', '_fdpath', '_abspath', '_gomatch_class', '_gomatch',
             '_ignored', '_deny', '_file_decide', '_check_path', '_parse_ip', '_show_ip', '_net_decide',
             '_net_refuse', '_net_check', '_frame_kind', '_stdlib_rel', '_api_refuse', '_api_chain', '_gate',
             '_h_open', '_h_list', '_h_xattr_read', '_h_write1', '_h_mkdir', '_h_two', '_h_symlink', '_h_chdir',
             '_h_import', '_h_api', '_h_frame_api', '_h_getattr', '_h_setattr', '_h_code', '_h_sock',
             '_h_resolve', '_hook', '_dir_of')
