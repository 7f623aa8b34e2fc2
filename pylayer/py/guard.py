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
#   - the mutable objects that decide (the cache of allowed paths, the frame-kind
#     cache, the registry of what the layer makes after arming) live in
#     functions' defaults, and the hook deletes its locals before it raises;
#   - reading or setting __code__/__defaults__/__kwdefaults__ of the layer's
#     functions (the sealed wrappers of arm.py included) is refused (CPython
#     audits those accesses, and the special attributes of classes, not the
#     others);
#   - the layer's own code is told by identity (ids of its code objects, kept
#     alive), a library's by its file name, which no program can give its own
#     code (see _h_codenew, _h_compile, _h_marshal).
#
# The JSON encoder (to_json, _json) comes before this module's text: the
# embedding puts the one the layer shares there (package internal/pyjson).

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
_GETFRAME = _sys._getframe

# S layout (indexes used literally below):
#  0 learning (bool)        1 exposes ((path, prefix, rw, raw, ref), ...) deepest first
#  2 implicit ((path, prefix, rw, why), ...)   3 ignores ((pattern, absolute, raw, ref), ...)
#  4 net rules ((allow, protos, dirs, ((fam, net, bits), ...), ((lo, hi), ...), raw, ref, named), ...)
#    (named: the rule's network is a host name, pinned in 5)
#  5 pins {host: ((fam, int, text), ...)}      6 import-all (raw, ref) or None
#  7 imports {module: (raw, ref)}              8 api {qualname: (allowed, category, raw, ref)}
#  9 frame doors {(stdlib file, co_qualname): qualname}
# 10 stdlib roots (with '/')  11 ids of the layer's code objects (kept alive by 21)  12 send(kind, text)
# 13 exception classes (file, permission, connection, module, api)
# 14 the pid of the eval zygote (None otherwise)   15 api events {event: (qualname, ...)}
# 16 unused (None)
# 17 id() of the layer's classes and functions   18 denials sent (set)   19 observations sent (set)
# 20 the import judge's state (see imports)   21 the layer's code objects


# ---------------------------------------------------------------- primitives

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

def _deny(S, kind, cls, msg, target, rule, ref, obs, errno=None, quiet=False, _js=_json, _len=len):
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

def _exists(p, _lstat=_posix.lstat, _OSError=OSError):
    """False when nothing is at p (ENOENT, ENOTDIR): what a read there would find."""
    try:
        _lstat(p)
    except _OSError as e:
        return e.errno != 2 and e.errno != 20
    return True


def _file_decide(S, canon, write, shown, record_dir, quiet=False, sock=False, _ignored=_ignored, _deny=_deny,
                 _exists=_exists):
    """None when the access is allowed, else the exception (None in learning
    mode, after recording). canon is canonical, shown the absolute spelling.
    sock: a Unix socket the program connects or sends to (the refusal is the
    network's, with the file rule's reason)."""
    ig = _ignored(S, canon)
    if ig is None and shown != canon:
        ig = _ignored(S, shown)
    obs = {'files': [[shown, write, record_dir]]}
    if ig is not None:
        msg, rule, ref, cls, errno = "Access to '%s' is ignored by rule '%s' from %s" % (shown, ig[2], ig[3]), ig[2], ig[3], 0, 2
    else:
        msg = None
        for e in S[1]:
            if canon == e[0] or canon.startswith(e[1]):
                if write and not e[2]:
                    for m in S[2]:
                        if m[2] and (canon == m[0] or canon.startswith(m[1])):
                            return None
                    msg, rule, ref, cls, errno = "Cannot write to '%s'. Rule '%s' from %s" % (shown, e[3], e[4]), e[3], e[4], 1, 13
                    break
                return None
        if msg is None:
            for m in S[2]:
                if canon == m[0] or canon.startswith(m[1]):
                    if write and not m[2]:
                        msg = "Cannot write to '%s'. DENIED by implicit default policy (%s is read-only)." % (shown, m[3])
                        rule, ref, cls, errno = '', '', 1, 13
                        break
                    return None
        if msg is None:
            msg, rule, ref, cls, errno = "Access to '%s' must be accepted by a rule." % shown, '', '', 0, 2
    if S[0] and not write and not quiet and not _exists(shown):
        return None  # learning: a read of nothing (a probe that fails anyway) grants nothing
    if sock:
        return _deny(S, 'network', S[13][2], "Connection to Unix socket '%s' DENIED: %s" % (shown, msg), shown, rule,
                     ref, obs, 111, quiet)
    return _deny(S, 'file', S[13][cls], msg, shown, rule, ref, obs, errno, quiet)


def _nofollow(a, _realpath=_realpath):
    """Canonical form of an absolute path whose last component is not followed
    (the link itself, as unlink, rename and lstat see it)."""
    d, _, name = a.rstrip('/').rpartition('/')
    if name in ('', '.', '..') or a.endswith('/'):
        return _realpath(a)
    d = _realpath(d or '/')
    return ('' if d == '/' else d) + '/' + name


def _realpath_c(a, cache, _realpath=_realpath, _lstat=_posix.lstat, _islnk=_stat.S_ISLNK, _OSError=OSError):
    """_realpath(a), with the canonical form of a's directory remembered in
    cache (under ('dir', directory); the cache is cleared when the program
    writes): one lstat for a new name in a known directory."""
    if cache is None:
        return _realpath(a)
    d, _, name = a.rpartition('/')
    if name == '' or name == '.' or name == '..':
        return _realpath(a)
    if d == '':
        d = '/'
    key = ('dir', d)
    cd = cache.get(key)
    if cd is None:
        cd = _realpath(d)
        cache[key] = cd
    full = ('' if cd == '/' else cd) + '/' + name
    try:
        st = _lstat(full)
    except _OSError:
        return full
    if _islnk(st.st_mode):
        return _realpath(full)
    return full


def _check_path(S, p, write, dir_fd=None, record_dir=False, quiet=False, follow=True, sock=False, cache=None,
                _tostr=_tostr, _abspath=_abspath, _realpath=_realpath_c, _nofollow=_nofollow, _decide=_file_decide,
                _deny=_deny):
    s = _tostr(p)
    if s is None or s == '':
        return None  # a descriptor, or the OS call fails by itself
    a = _abspath(s, dir_fd)
    if a is None:
        return _deny(S, 'file', S[13][0],
                     "Access to '%s' must be accepted by a rule (its dir_fd cannot be resolved)." % s, s, '', '', None, 2)
    return _decide(S, _realpath(a, cache) if follow else _nofollow(a), write, a, record_dir, quiet, sock)


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


def _net_fix(proto, direction, net, port):
    """The rule line that would allow an operation (port None: any port)."""
    return 'net=ALLOW|%s|%s|%s|%s' % ('udp' if proto == 2 else 'tcp', net, '*' if port is None else port,
                                      'IN' if direction == 1 else 'OUT')


def _net_refuse(S, proto, direction, host, ip, port, rule, _show=_show_ip, _deny=_deny, _fix=_net_fix):
    """The refusal of one operation addressed to host (a name, or '' for the
    address ip) and port (None: any), by rule (None: the implicit default
    policy, and the message ends with the rule line that would allow it). A name
    with ip is refused for that address, which the message names."""
    shown = host if host else _show(ip)
    p = 0 if port is None else port
    verb = 'connection to' if direction == 2 else 'bind to'
    note = " ('%s' resolves to %s)" % (host, _show(ip)) if host and ip is not None else ''
    if rule is None:
        msg = "Guard network %s '[%s]:%d' DENIED by implicit default policy%s.\nAdd `%s`." % (
            verb, shown, p, note, _fix(proto, direction, shown, port))
        raw = ref = ''
    else:
        msg = "%s [%s]:%d DENIED by explicit rule '%s' from %s%s" % (verb.capitalize(), shown, p, rule[5], rule[6], note)
        raw, ref = rule[5], rule[6]
    obs = None
    if ip is not None and port is not None:
        obs = {'net': [['tcp' if proto == 1 else 'udp', 'in' if direction == 1 else 'out', host or '', _show(ip), port]]}
    return _deny(S, 'network', S[13][2], msg, '[%s]:%d' % (shown, p), raw, ref, obs, 111)


def _net_check(S, proto, direction, host, port, _parse=_parse_ip, _decide=_net_decide, _refuse=_net_refuse):
    """Check one operation addressed to an address, or to a name pinned by the
    policy (allowed only when every address pinned for it is); None when it is
    allowed, else the refusal (None in learning mode, after recording). Any
    other name falls to the implicit default policy: see _net_unresolved for a
    name the C code resolves itself."""
    ip = _parse(host)
    if ip is not None:
        ok, rule = _decide(S, proto, ip, port, direction)
        if ok:
            return None
        return _refuse(S, proto, direction, '', ip, port, rule)
    pinned = S[5].get(host.lower().rstrip('.'))
    if not pinned:
        return _refuse(S, proto, direction, host, None, port, None)
    for fam, v, text in pinned:
        ok, rule = _decide(S, proto, (fam, v), port, direction)
        if not ok:
            return _refuse(S, proto, direction, host, (fam, v), port, rule)
    return None


def _in_ports(r, port):
    """Whether rule r covers port (None: some port)."""
    if port is None:
        return r[4] != ()
    for lo, hi in r[4]:
        if lo <= port <= hi:
            return True
    return False


def _net_open(S, proto, port, direction, fams, _in=_in_ports):
    """Whether every address of the families fams (4, 6) is allowed for proto
    (one protocol), port and direction: an ALLOW rule takes the whole family
    (a /0: '*', 0.0.0.0/0, ::/0) and no DENY rule matches any address of it
    there. Then a host name needs no judging: whatever it resolves to is
    allowed, as the OS layer allows it."""
    for fam in fams:
        whole = False
        for r in S[4]:
            if not (r[1] & proto) or not (r[2] & direction) or not _in(r, port):
                continue
            for f, net, bits in r[3]:
                if f == fam:
                    if not r[0]:
                        return False
                    if bits == 0:
                        whole = True
        if not whole:
            return False
    return True


def _net_can(S, protos, port, direction, fams, _in=_in_ports):
    """(can, deny): can is whether an ALLOW rule written as a network or '*'
    covers addresses of the families fams for one of protos, port (None: any)
    and direction (a set), so that a name the policy does not pin may resolve
    to an address it allows (a rule naming a host allows that pinned name, a
    rule naming one address that address: another name for it must be named
    by a rule); deny is a DENY rule that matches every address there, when
    there is one (it refuses whatever the name resolves to)."""
    deny = None
    can = False
    for r in S[4]:
        if not (r[1] & protos) or not (r[2] & direction) or not _in(r, port):
            continue
        for f, net, bits in r[3]:
            if f in fams:
                if not r[0]:
                    if bits == 0 and deny is None:
                        deny = r
                elif not r[7] and bits < (32 if f == 4 else 128):
                    can = True
    return can, deny


def _net_partial(S, proto, port, direction, fams, _in=_in_ports):
    """(allow, deny): the first ALLOW and the first DENY rule that match some
    address of the families fams for proto, port and direction (None when
    none does)."""
    allow = deny = None
    for r in S[4]:
        if not (r[1] & proto) or not (r[2] & direction) or not _in(r, port):
            continue
        for f, net, bits in r[3]:
            if f in fams:
                if r[0] and allow is None:
                    allow = r
                elif not r[0] and deny is None:
                    deny = r
                break
    return allow, deny


def _net_unresolved(S, proto, direction, host, port, fams, who, hint, _open=_net_open, _partial=_net_partial,
                    _refuse=_net_refuse, _deny=_deny):
    """An operation addressed to a host name that the C code (who: the socket
    itself, libpq) resolves after any check can run: the address it picks
    cannot be judged, so the name is allowed only where every address is
    (_net_open). Else the refusal names the rule that makes addresses differ
    there (a DENY rule, else the ALLOW rule that takes some), or the implicit
    default policy when no rule allows any address there (with the rule line
    that pins the name), and says what to do (hint)."""
    if _open(S, proto, port, direction, fams):
        return None
    allow, deny = _partial(S, proto, port, direction, fams)
    if allow is None:
        # No rule allows any address there: the default refuses the name.
        return _refuse(S, proto, direction, host, None, port, None)
    r = allow if deny is None else deny
    verb = 'connection to' if direction == 2 else 'bind to'
    what = 'refuses some addresses there' if not r[0] else 'allows only some addresses there'
    msg = ("Guard network %s '[%s]:%d' DENIED: %s resolves the host name itself, after any check, so the address "
           "it picks cannot be judged; rule '%s' from %s %s. %s") % (verb, host, port, who, r[5], r[6], what, hint)
    return _deny(S, 'network', S[13][2], msg, '[%s]:%d' % (host, port), r[5], r[6], None, 111)


def _gai_judge(S, host, port, type, proto, flags, res, _tostr=_tostr, _parse=_parse_ip, _decide=_net_decide,
               _refuse=_net_refuse, _type=type, _int=int, _tuple=tuple, _len=len, _str=str, _bytes=bytes,
               _isinstance=isinstance, _Exception=Exception):
    """After socket.getaddrinfo answered (the pinned addresses, or the
    resolver's), for the protocol, port and direction the call names (type or
    proto, a numeric port, AI_PASSIVE for a bind): a name is refused when a
    DENY rule matches any address of the answer (DENY first, whatever the
    order of the answer), or when no address of it is allowed. An address the
    default refuses among allowed ones is left to the connect, which judges
    the address it is given (as the OS layer judges each connection: an IPv6
    answer under IPv4 rules is refused there, and create_connection tries the
    next). Without protocol and port nothing is judged here. None, or the
    refusal (None in learning mode)."""
    if S[0]:
        return None
    h = _tostr(host) if host is not None else None
    if h is None or h == '' or _parse(h) is not None:
        return None
    if _type(port) is _str or _type(port) is _bytes:
        t = port.decode('ascii', 'replace') if _type(port) is _bytes else port
        if not t.isdigit() or not t.isascii() or _len(t) > 5:
            return None
        port = _int(t)
    elif _isinstance(port, _int):
        port = _int(port)
    else:
        return None
    # type, proto and flags may be the socket module's enums (int subclasses).
    try:
        t = _int(type) & 0xf if _isinstance(type, _int) else 0
        pr = _int(proto) if _isinstance(proto, _int) else 0
        passive = _isinstance(flags, _int) and _int(flags) & 1
    except _Exception:
        return None
    p = 1 if t == 1 else 2 if t == 2 else 1 if pr == 6 else 2 if pr == 17 else 0
    if p == 0 or (port == 0 and not passive):
        return None  # port 0 names no port to connect to (a bind's is ephemeral)
    direction = 1 if passive else 2
    first = None
    for e in res:
        if _type(e) is not _tuple or _len(e) < 5 or _type(e[4]) is not _tuple or _type(e[4][0]) is not _str:
            continue
        ip = _parse(e[4][0])
        if ip is None:
            continue
        ok, rule = _decide(S, p, ip, port, direction)
        if ok:
            first = False
        elif rule is not None:
            return _refuse(S, p, direction, h, ip, port, rule)
        elif first is None:
            first = ip
    if first:
        return _refuse(S, p, direction, h, first, port, None)
    return None


# ---------------------------------------------------------------- frames and API

# What the layer makes after it is armed (the sealed wrappers of the modules
# imported later): the ids of their code objects (the layer's own frames) and of
# the functions (protected as the layer's own), and the objects themselves, kept
# alive (an id is never reused while its object lives). Reachable only through
# the defaults of the functions below (reading them is refused). Code objects
# are told by id: a sealed function's code holds unhashable constants.
_REG = (set(), set(), [])


def _register(kind, obj, _reg=_REG, _id=id):
    """Record one object of the layer made after arming (kind 0: a code object,
    1: a function). Removed from the guard's namespace when it is armed: only
    the layer holds it."""
    _reg[2].append(obj)
    if kind == 0:
        _reg[0].add(_id(obj))
    else:
        _reg[1].add(_id(obj))


def _frame_kind(S, code, _len=len, _cache={}, _reg=_REG, _id=id):
    """'ours', 'ambient' (stdlib, site-packages, <frozen ...>) or 'user', by the
    code's file name (never by __name__, which the globals may spoof; and no
    program can make a code object named as a library file, see _h_codenew)."""
    i = _id(code)
    if i in S[11] or i in _reg[0]:
        return 'ours'
    fn = code.co_filename
    k = _cache.get(fn)
    if k is not None:
        return k
    k = 'user'
    if fn.startswith('<'):
        if fn.startswith('<frozen '):
            k = 'ambient'
    else:
        for d in S[20][3]:
            if fn.startswith(d):
                k = 'ambient'
                break
    if _len(_cache) < 8192:
        _cache[fn] = k
    return k


def _is_own_id(obj, _reg=_REG, _id=id):
    return _id(obj) in _reg[1]


del _REG


# ---------------------------------------------------------------- imports
#
# An import is judged by who imports. Application code (and code given as a
# string) needs a python-import= rule for every module it imports, cached or not;
# what a library imports for its own use (an import statement in its code, or
# anything during its module's initialisation) is allowed with it. The walk below
# finds the frame an import is charged to: from the place the import is seen,
# outward, through the import system and library functions, to the first
# application frame, unless a library import statement or a library module body
# comes first. S[20] holds (IMPORT_NAME, EXTENDED_ARG, the modules the
# interpreter's C code imports for itself, the library roots for module names,
# the modules always allowed, sys.modules, the protected file name prefixes, the
# genuine code of importlib's _compile_bytecode).

def _stmt_top(code, i, ext, _len=len):
    """The first component of the module named by the IMPORT_NAME at offset i."""
    b = code.co_code
    arg = b[i + 1]
    j = i - 2
    shift = 8
    while j >= 0 and b[j] == ext:
        arg |= b[j + 1] << shift
        shift += 8
        j -= 2
    names = code.co_names
    if arg >= _len(names):
        return ''
    return names[arg].partition('.')[0]


def _own_top(f, _type=type, _str=str, _get=dict.get, _dict=dict):
    """The top-level package of the module a frame runs in (its __package__ or
    __name__), '' when unknown."""
    g = f.f_globals
    if _type(g) is not _dict:
        return ''
    p = _get(g, '__package__')
    if _type(p) is not _str or not p:
        p = _get(g, '__name__')
        if _type(p) is not _str:
            return ''
    return p.partition('.')[0]


def _importer(S, f, top, full, request, _kind=_frame_kind, _stmt=_stmt_top, _own=_own_top):
    """The application frame an import of module full (top-level top) is charged
    to, or None. request: the import comes from a function that imports what its
    caller names (importlib.import_module, a pickle naming a class...). top '':
    no module, the frame of the application's call that leads there.

    The layer's own frames are passed through (a program may call the layer's
    functions: what they import for it is charged to it). A library's import
    statement, or its module body, ends the walk: the library imports for
    itself. At an application frame: its import statement is charged when it
    names that module (else the import system loads something for itself while
    the statement runs); a call is charged when the program names the module
    (__import__, import_module, a pickle, a library that imports what its caller
    names), or when C code it called loads a module that is neither already
    loaded nor one the interpreter's C code imports for itself."""
    imp = S[20]
    op = imp[0]
    while f is not None:
        code = f.f_code
        k = _kind(S, code)
        if k == 'ours':
            f = f.f_back
            continue
        if k == 'user':
            i = f.f_lasti
            if i >= 0 and code.co_code[i] == op:
                if _stmt(code, i, imp[1]) == top or _own(f) == top:
                    return f
                return None
            names = code.co_names
            if '__import__' in names or 'import_module' in names:
                return f
            if top in imp[2]:
                return None
            if request or full not in imp[5]:
                return f
            return None
        i = f.f_lasti
        if (i >= 0 and code.co_code[i] == op) or code.co_name == '<module>':
            return None
        names = code.co_names
        if '__import__' in names or 'import_module' in names:
            request = True  # the library imports what its caller names
        f = f.f_back
    return None


def _where(S, f, _getcwd=_posix.getcwd, _len=len, _str=str, _OSError=OSError):
    """file(line) of a frame, the file relative to the working directory when
    under it."""
    fn = f.f_code.co_filename
    try:
        cwd = _getcwd()
    except _OSError:
        cwd = ''
    if cwd and cwd != '/' and fn.startswith(cwd + '/'):
        fn = fn[_len(cwd) + 1:]
    return '%s(%s)' % (fn, _str(f.f_lineno))


# Standard modules that can undo the sandbox or run code outside it: a refusal
# that names one as its fix says so (policy.DangerousImports is the same list).
DANGEROUS_IMPORTS = frozenset(('atexit', 'bdb', 'code', 'codeop', 'cProfile', 'ctypes', 'faulthandler',
                               'importlib', 'inspect', 'mmap', 'pdb', 'pkgutil', 'posix', 'subprocess',
                               'webbrowser'))


def _import_check(S, full, f, request=False, _importer=_importer, _where=_where, _deny=_deny, _type=type,
                  _str=str, _danger=DANGEROUS_IMPORTS):
    """None when the import of module full (absolute, dotted) seen at frame f is
    allowed, else the exception (None in learning mode, after recording)."""
    if _type(full) is not _str:
        return None
    top = full.partition('.')[0]
    if top == '' or S[6] is not None or top in S[7] or top in S[20][4]:
        return None
    g = _importer(S, f, top, full, request)
    if g is None:
        return None
    msg = ("Module named '%s' is not allowed by a rule (imported by %s).\n"
           "Add `python-import=%s`.") % (top, _where(S, g), top)
    if top in _danger:
        msg += "\n\u26a0 Dangerous! '%s' can undo the sandbox or run code outside it." % top
    del g
    e = _deny(S, 'import', S[13][3], msg, top, '', '', {'imports': [top]})
    if e is not None:
        e.name = full
    return e


def _mod_of(S, fn, _len=len):
    """The dotted name of the module a library file holds (its source, compiled
    or extension file, or <frozen name>), or None when fn is not a library file."""
    if fn.startswith('<frozen ') and fn.endswith('>'):
        return fn[8:-1]
    rel = None
    for root in S[20][3]:
        if fn.startswith(root):
            rel = fn[_len(root):]
            break
    if rel is None:
        return None
    parts = rel.split('/')
    last = parts.pop()
    if parts and parts[-1] == '__pycache__':
        parts.pop()
    last = last.partition('.')[0]
    if last != '__init__' and last != '':
        parts.append(last)
    if not parts:
        return None
    return '.'.join(parts)


def _library_file(S, fn, _mod=_mod_of):
    """True for a file name no program may give its own code: a library file,
    <frozen ...>, or the layer's own <pysandboxes/...>."""
    for p in S[20][6]:
        if fn.startswith(p):
            return True
    return _mod(S, fn) is not None


def _stdlib_rel(S, fn, _len=len):
    """The file of a stdlib module relative to the stdlib directory ('os.py');
    a frozen module (<frozen os>) as its file would be."""
    if fn.startswith('<frozen ') and fn.endswith('>'):
        return fn[8:-1].replace('.', '/') + '.py'
    for d in S[10]:
        if fn.startswith(d):
            return fn[_len(d):]
    return None


def _api_refuse(S, q, v, _deny=_deny):
    cat = v[1]
    msg = ("%s() is denied by the API guard (category: %s).\n"
           "Add `python-api=ALLOW:%s` for this function only, or `python-api=ALLOW:%s` for the whole category.") % (q, cat, q, cat)
    if v[4]:
        msg += ("\n\u26a0 Dangerous! The category %s can undo the sandbox: allow the one function, "
                "and only if the program needs it." % cat)
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
        err = _check(S, p, write, None, False, False, True, False, cache)
        if err is None and not S[0]:
            # The hook answers the same (path, mode, flags) from the cache.
            if _len(cache) > 4096:
                cache.clear()
            cache[args] = None
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
    # A pseudo file name (<string>, <unknown>: what traceback and linecache look
    # for) is refused without a report.
    s = None if _type(p) is _int else _tostr(p)
    quiet = s is not None and not write and s[:1] == '<' and s[-1:] == '>'
    return _check(S, p, write, None, False, quiet)


def _ancestor(S, canon, _len=len):
    """True when canon is a directory above an exposed or implicit path (a
    listing of it shows only the names on the way there)."""
    pre = '/' if canon == '/' else canon + '/'
    for e in S[1]:
        if e[0].startswith(pre):
            return True
    for m in S[2]:
        if m[0].startswith(pre):
            return True
    return False


# The stdlib modules that glob: a pattern through a directory that is not exposed
# ('ro/../*/x') lists what is visible there and hides the rest.
_GLOBBERS = frozenset(('glob.py', 'pathlib.py', 'pathlib/_local.py', 'pathlib/_abc.py'))


def _h_list(S, event, args, cache, _type=type, _int=int, _fdpath=_fdpath, _decide=_file_decide,
            _realpath=_realpath, _check=_check_path, _getframe=_GETFRAME, _kind=_frame_kind, _rel=_stdlib_rel,
            _tostr=_tostr, _abspath=_abspath, _ancestor=_ancestor, _globbers=_GLOBBERS):
    p = args[0]
    if p is None:
        p = '.'
    if _type(p) is _int:
        a = _fdpath(p)
        if a is None:
            return None
        return _decide(S, _realpath(a), False, a, True)
    f = _getframe(2)
    while f is not None and _kind(S, f.f_code) == 'ours':
        f = f.f_back
    fn = '' if f is None else f.f_code.co_filename
    del f
    # The import system lists every sys.path entry: refused there too, but not
    # reported nor learned (a module it then opens is).
    quiet = fn == '<frozen importlib._bootstrap_external>'
    if not quiet and _rel(S, fn) in _globbers:
        s = _tostr(p)
        a = _abspath(s) if s is not None else None
        if a is not None:
            c = _realpath(a)
            if _decide(S, c, False, a, True, True) is not None and _ancestor(S, c):
                return None  # listed as a skeleton (see _list_keep)
    return _check(S, p, False, None, True, quiet)


def _list_base(S, p, _type=type, _int=int, _fdpath=_fdpath, _tostr=_tostr, _abspath=_abspath,
               _realpath=_realpath, _decide=_file_decide):
    """(canonical directory, skeleton) of a listing of p ((None, False) when it
    cannot be told); skeleton: the directory is not visible, only the names on
    the way to what is."""
    if p is None:
        p = '.'
    if _type(p) is _int:
        b = _fdpath(p)
    else:
        s = _tostr(p)
        a = _abspath(s) if s is not None else None
        b = _realpath(a) if a is not None else None
    if b is None:
        return None, False
    return b, _decide(S, b, False, b, False, True) is not None


def _list_keep(S, base, skel, name, link, _type=type, _str=str, _tostr=_tostr, _ignored=_ignored,
               _realpath=_realpath, _decide=_file_decide):
    """True when an entry of a listing of base is shown: not ignored, on the way
    to a visible path in a skeleton listing, and not a symbolic link to what the
    program may not see (its metadata, through the entry, would be)."""
    n = name if _type(name) is _str else _tostr(name)
    if n is None or base is None:
        return True
    full = ('' if base == '/' else base) + '/' + n
    if _ignored(S, full) is not None:
        return False
    if skel:
        pre = full + '/'
        seen = False
        for e in S[1]:
            if e[0] == full or e[0].startswith(pre):
                seen = True
                break
        if not seen:
            for m in S[2]:
                if m[0] == full or m[0].startswith(pre):
                    seen = True
                    break
        if not seen:
            return False
    if link:
        c = _realpath(full)
        if _ignored(S, c) is not None or _decide(S, c, False, full, False, True) is not None:
            return False
    return True


def _scan_gen(S, it, base, skel, _keep=_list_keep):
    """The entries of an os.scandir iterator that a listing shows."""
    try:
        for e in it:
            if _keep(S, base, skel, e.name, e.is_symlink()):
                yield e
    finally:
        it.close()


def _listdir_call(S, orig, path=None, _base=_list_base, _gen=_scan_gen):
    """os.listdir(path): the names os.scandir shows."""
    it = orig(path) if path is not None else orig()
    b, skel = _base(S, path)
    return [e.name for e in _gen(S, it, b, skel)]


def _scandir_call(S, orig, wrap, path=None, _base=_list_base, _gen=_scan_gen):
    """os.scandir(path): an iterator over the entries a listing shows."""
    it = orig(path) if path is not None else orig()
    b, skel = _base(S, path)
    return wrap(_gen(S, it, b, skel))


def _h_xattr_read(S, event, args, cache, _check=_check_path):
    return _check(S, args[0], False)


def _h_write1(S, event, args, cache, _check=_check_path):
    # os.remove, os.rmdir (path, dir_fd); os.chmod (path, mode, dir_fd); os.chown
    # (path, uid, gid, dir_fd); os.utime (path, times, ns, dir_fd); os.setxattr,
    # os.removexattr, os.truncate (path, ...)
    # A name that is removed is judged where it is (a symbolic link by itself,
    # not by its target).
    cache.clear()
    dir_fd = None
    if event == 'os.remove' or event == 'os.rmdir':
        return _check(S, args[0], True, args[1], False, False, False)
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
    # os.rename, os.replace, os.link (src, dst, src_dir_fd, dst_dir_fd): both
    # sides write. A rename moves names (a symbolic link is judged by itself); a
    # hard link is made to the target, which could then be written through the
    # new name.
    cache.clear()
    follow = event == 'os.link'
    err = _check(S, args[0], True, args[2], False, False, follow)
    if err is None:
        err = _check(S, args[1], True, args[3], False, False, follow)
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


def _h_import(S, event, args, cache, _type=type, _str=str, _getframe=_GETFRAME, _mod=_mod_of,
              _check=_import_check):
    # The import system loads a module: the C import path on a cache miss
    # (args[1] None), or an extension module (args[1] its file: the module is the
    # one the file holds, whatever name it is loaded under).
    name = args[0]
    if _type(name) is not _str:
        return None
    path = args[1]
    if _type(path) is _str:
        m = _mod(S, path)
        if m is not None:
            name = m
    f = _getframe(2)
    e = _check(S, name, f)
    del f
    return e


def _h_findclass(S, event, args, cache, _getframe=_GETFRAME, _chain=_api_chain, _check=_import_check):
    # A pickle names a class: the unpickler is a registered door (deserialization),
    # and the module it imports is imported on the program's request.
    f = _getframe(2)
    err = _chain(S, f, ('pickle.loads',))
    if err is None:
        err = _check(S, args[0], f, True)
    del f
    return err


def _exec_path(env, _type=type, _dict=dict, _get=dict.get, _tostr=_tostr, _modules=_sys.modules, _getattr=getattr):
    """The PATH a program is looked up on: env's (a dict given to the call),
    else the program's own environment (read without recording it)."""
    if env is not None:
        if _type(env) is not _dict:
            return None
        v = _get(env, 'PATH')
        if v is None:
            v = _get(env, b'PATH')
        return '' if v is None else _tostr(v)
    osmod = _modules.get('os')
    data = _getattr(_getattr(osmod, 'environ', None), '_data', None) if osmod is not None else None
    if _type(data) is not _dict:
        return None
    v = _get(data, b'PATH')
    return None if v is None else _tostr(v)


def _ran(S, event, args, _tostr=_tostr, _abspath=_abspath, _getcwd=_posix.getcwd, _type=type, _list=list,
         _tuple=tuple, _len=len, _str=str, _path=_exec_path, _deny=_deny, _Exception=Exception):
    """Learning: record the program a process runs (what it needs to start is
    then learned): [program, working directory, PATH or None, whether the name is
    looked up on PATH, the command of a shell]."""
    try:
        prog = _tostr(args[0])
        cwd = None
        env = None
        search = True
        cmd = ''
        if event == 'subprocess.Popen':
            cwd = args[2]
            env = args[3]
            argv = args[1]
            if (_type(argv) is _list or _type(argv) is _tuple) and _len(argv) >= 3 and argv[1] == '-c':
                cmd = _tostr(argv[2]) or ''
        elif event == 'os.exec':
            env = args[2]
            search = False
        elif event == 'os.posix_spawn':
            env = None
        elif event == 'os.system':
            prog = '/bin/sh'
            cmd = _tostr(args[0]) or ''
        else:
            return
        if prog is None or prog == '':
            return
        c = _tostr(cwd) if cwd is not None else None
        c = _abspath(c) if c else _getcwd()
        if c is None:
            return
        _deny(S, 'exec', None, '', '', '', '', {'exec': [[prog, c, _path(env), search, cmd[:256]]]})
    except _Exception:
        return


def _h_sqlite(S, event, args, cache, _tostr=_tostr, _abspath=_abspath, _lstat=_posix.lstat, _check=_check_path,
              _dir_of=_dir_of, _deny=_deny, _len=len, _OSError=OSError):
    # sqlite3.connect(database): the C library opens the file, and makes its
    # journal beside it when it writes. Judged as a read of the file, or the
    # write of a new one in its directory; learning records it (the host tells
    # afterwards whether it changed).
    db = _tostr(args[0]) if _len(args) else None
    if db is None or db == '' or db == ':memory:':
        return None
    ro = False
    if db.startswith('file:'):
        rest = db[5:]
        query = ''
        i = rest.find('?')
        if i >= 0:
            rest, query = rest[:i], rest[i + 1:]
        i = rest.find('#')
        if i >= 0:
            rest = rest[:i]
        if rest.startswith('//'):
            i = rest.find('/', 2)
            if i < 0:
                return None
            rest = rest[i:]
        if rest == '' or rest == ':memory:' or 'mode=memory' in query:
            return None
        ro = 'mode=ro' in query or 'immutable=1' in query
        db = rest
    a = _abspath(db)
    if a is None:
        return None
    try:
        st = _lstat(a)
    except _OSError:
        st = None
    if S[0]:
        _deny(S, 'file', None, '', '', '', '',
              {'sqlite': [[a, st is not None, st.st_mtime_ns if st is not None else 0,
                           st.st_size if st is not None else 0, ro]]})
        return None
    if st is not None or ro:
        return _check(S, a, False)
    return _check(S, _dir_of(a), True, None, True)


def _file_rule(S, canon, _ignored=_ignored):
    """The rule that decides a refused access to canon: (raw, ref) of the
    ignore= rule that hides it, else of the expose rule that covers it (one
    that does not let it be written), else ('', '') for the default deny."""
    ig = _ignored(S, canon)
    if ig is not None:
        return ig[2], ig[3]
    for e in S[1]:
        if canon == e[0] or canon.startswith(e[1]):
            return e[3], e[4]
    return '', ''


def _shm_refuse(S, what, e, _decide=_file_decide, _rule=_file_rule, _deny=_deny, _type=type, _int=int):
    """The refusal to raise instead of e, an OSError of the C library making a
    POSIX semaphore or shared memory object in /dev/shm, when the policy does not
    let the program write there (None otherwise: e stands). It names the rule
    that refuses (an expose-ro= or an ignore= rule), else the default deny."""
    n = e.errno
    if _type(n) is not _int or (n != 1 and n != 13 and n != 30):
        return None
    if _decide(S, '/dev/shm', True, '/dev/shm', True, True) is None:
        return None
    rule, ref = _rule(S, '/dev/shm')
    if rule:
        why = "DENIED by explicit rule '%s' from %s" % (rule, ref)
    else:
        why = 'DENIED by implicit default policy.'
    msg = ("Cannot create %s in '/dev/shm' ([Errno %d] %s): %s\n"
           "Add `expose-rw=/dev/shm`.") % (what, n, e.strerror, why)
    return _deny(S, 'file', S[13][1], msg, '/dev/shm', rule, ref, None, 13)


def _shm_learn(S, _decide=_file_decide):
    """Learning: the program makes a POSIX semaphore or shared memory object."""
    _decide(S, '/dev/shm', True, '/dev/shm', True)


def _h_api(S, event, args, cache, _getframe=_GETFRAME, _chain=_api_chain, _getpid=_posix.getpid, _ran=_ran):
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
        if S[0]:
            _ran(S, event, args)
    f = _getframe(2)
    err = _chain(S, f, quals)
    del f
    return err


def _frame_taker(S, f, quals, _kind=_frame_kind, _rel=_stdlib_rel, _chain=_api_chain):
    """The check of code f that takes a frame (None: allowed): the layer's own
    code and the stdlib's and site-packages' may, except inspect (its
    currentframe, stack and trace hand frames on to their caller); other code as
    a call of the API quals."""
    if f is None:
        return None
    code = f.f_code
    k = _kind(S, code)
    if k == 'ours' or (k == 'ambient' and _rel(S, code.co_filename) != 'inspect.py'):
        return None
    return _chain(S, f, quals)


def _h_frame_api(S, event, args, cache, _getframe=_GETFRAME, _kind=_frame_kind, _taker=_frame_taker):
    # sys._getframe / sys._getframemodulename. The stdlib and site-packages use
    # them for logging, warnings, typing, enum, namedtuple: allowed, except
    # inspect's currentframe, stack and trace, which hand frames to their caller.
    if event == 'sys._getframe':
        fr = args[0]
        if fr is not None and _kind(S, fr.f_code) == 'ours':
            return None
    return _taker(S, _getframe(2), S[15].get(event))


def _library_code(S, code, f, _type=type, _mod=_mod_of, _check=_import_check, _importer=_importer,
                  _kind=_frame_kind, _deny=_deny, _CODE=type(_library_file.__code__)):
    """Code of a library module run outside that module (a function made of it,
    a function's code replaced by it, exec of it, the import system running a
    module body): allowed when the program may import that module. The layer's
    own code runs only where the layer puts it."""
    if _type(code) is not _CODE or f is None:
        return None
    fn = code.co_filename
    m = _mod(S, fn)
    if m is not None:
        return _check(S, m, f, True)
    if fn.startswith('<pysandboxes/') and _kind(S, f.f_code) != 'ours' and \
            _importer(S, f, '', '', True) is not None:
        return _deny(S, 'api', S[13][4],
                     "Running the sandbox's own code outside it is DENIED by implicit default policy.", fn, '', '', None)
    return None


def _h_getattr(S, event, args, cache, _capture=frozenset(('tb_frame', 'gi_frame', 'cr_frame', 'ag_frame')),
               _own=frozenset(('__code__', '__defaults__', '__kwdefaults__')), _getframe=_GETFRAME,
               _kind=_frame_kind, _taker=_frame_taker, _deny=_deny, _id=id, _mine=_is_own_id):
    name = args[1]
    if name in _own:
        if _id(args[0]) not in S[17] and not _mine(args[0]):
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
    return _taker(S, _getframe(2), ('sys._getframe',))


def _h_setattr(S, event, args, cache, _deny=_deny, _id=id, _mine=_is_own_id, _getframe=_GETFRAME,
               _runs=_library_code, _len=len):
    obj = args[0]
    if _id(obj) in S[17] or _mine(obj):
        return _deny(S, 'api', S[13][1],
                     "Modifying the sandbox's own objects is DENIED by implicit default policy.", args[1], '', '', None, 1)
    if args[1] == '__code__' and _len(args) > 2:
        f = _getframe(2)
        e = _runs(S, args[2], f)
        del f
        return e
    return None


def _h_funcnew(S, event, args, cache, _getframe=_GETFRAME, _runs=_library_code):
    # types.FunctionType(code, globals): a library's code would run in the
    # program's globals, with a library's rights.
    f = _getframe(2)
    e = _runs(S, args[0], f)
    del f
    return e


def _h_codenew(S, event, args, cache, _getframe=_GETFRAME, _tostr=_tostr, _library=_library_file,
               _importer=_importer, _kind=_frame_kind, _deny=_deny, _len=len):
    # types.CodeType(...) and code.replace(...): no program may make a code object
    # named as a library file (the layer tells library code from the
    # application's by its file name).
    fn = _tostr(args[1]) if _len(args) > 1 else None
    if fn is None or not _library(S, fn):
        return None
    f = _getframe(2)
    if f is None or (fn.startswith('<pysandboxes/') and _kind(S, f.f_code) == 'ours'):
        g = None
    else:
        g = _importer(S, f, '', '', True)
    del f
    if g is None:
        return None
    del g
    return _deny(S, 'api', S[13][4],
                 "A code object named as the library file '%s' cannot be made by the program: DENIED by implicit "
                 "default policy." % fn, fn, '', '', None)


def _same_file(src, fn, _open=_posix.open, _read=_posix.read, _close=_posix.close, _fstat=_posix.fstat,
               _bytes=bytes, _type=type, _OSError=OSError, _bytearray=bytearray, _memoryview=memoryview,
               _len=len):
    """True when the bytes src are the whole content of the file fn."""
    if _type(src) is _memoryview or _type(src) is _bytearray:
        src = _bytes(src)
    if _type(src) is not _bytes:
        return False
    try:
        fd = _open(fn, 0o2000000)  # O_RDONLY | O_CLOEXEC
    except _OSError:
        return False
    try:
        n = _fstat(fd).st_size
        if n != _len(src):
            return False
        parts = []
        while n > 0:
            b = _read(fd, n if n < 1 << 20 else 1 << 20)
            if not b:
                return False
            parts.append(b)
            n -= _len(b)
        return _bytes().join(parts) == src
    except _OSError:
        return False
    finally:
        _close(fd)


def _genuine_load(S, f, _type=type, _str=str, _mod=_mod_of):
    """True when f is importlib's own _compile_bytecode called by a standard
    loader's get_code for a compiled file of a library directory (what the
    interpreter reads from its library, not what the program made)."""
    if f is None or f.f_code is not S[20][7][0]:
        return False
    b = f.f_back
    if b is None or b.f_code not in S[20][7][1]:
        return False
    loader = b.f_locals.get('self')
    if _type(loader) not in S[20][7][2]:
        return False
    bp = f.f_locals.get('bytecode_path')
    return _type(bp) is _str and _mod(S, bp) is not None


def _h_marshal(S, event, args, cache, _getframe=_GETFRAME, _genuine=_genuine_load, _kind=_frame_kind,
               _deny=_deny, _type=type, _bytes=bytes):
    # marshal.loads: code objects named as library files come only from the
    # library's own compiled files, read by the import system.
    data = args[0]
    f = _getframe(2)
    if f is None or _kind(S, f.f_code) == 'ours' or _genuine(S, f):
        del f
        return None
    del f
    if _type(data) is not _bytes:
        return None
    for p in S[20][8]:
        if data.find(p) >= 0:
            return _deny(S, 'api', S[13][4],
                         "Loading code named as a library file is DENIED by implicit default policy (only the "
                         "library's own compiled files may hold it).", '', '', '', None)
    return None


def _h_code(S, event, args, cache, _getframe=_GETFRAME, _kind=_frame_kind, _refuse=_api_refuse,
            _runs=_library_code, _type=type, _CODE=type(_library_file.__code__)):
    # exec of a code object: a library's code (a module being loaded by the import
    # system, or run by the program) is imported, as far as the policy goes.
    f = _getframe(2)
    if f is None:
        return None
    if event == 'exec' and _type(args[0]) is _CODE:
        e = _runs(S, args[0], f)
        if e is not None:
            del f
            return e
    # exec / compile reached without the patched builtins (restored originals):
    # refused for user code unless python-api allows them.
    k = _kind(S, f.f_code)
    del f
    if k != 'user':
        return None
    q = 'builtins.exec' if event == 'exec' else 'builtins.compile'
    v = S[8].get(q)
    if v is None or v[0]:
        return None
    return _refuse(S, q, v)


def _h_compile(S, event, args, cache, _getframe=_GETFRAME, _tostr=_tostr, _library=_library_file,
               _same=_same_file, _kind=_frame_kind, _deny=_deny, _code=_h_code, _len=len):
    # compile(source, filename): a source named as a library file must be that
    # file (the import system compiling a library module without its cache).
    fn = _tostr(args[1]) if _len(args) > 1 else None
    if fn is not None and _library(S, fn):
        f = _getframe(2)
        k = 'user' if f is None else _kind(S, f.f_code)
        del f
        if k != 'ours' and not _same(args[0], fn):
            return _deny(S, 'api', S[13][4],
                         "Compiling a source as the library file '%s' is DENIED by implicit default policy "
                         "(it is not that file)." % fn, fn, '', '', None)
    return _code(S, event, args, cache)


def _sock_kind(sock, _type=type, _Exception=Exception):
    """(family, type) of a socket as the C socket type itself reports them (a
    subclass cannot lie about them), or None."""
    try:
        base = _type(sock).__mro__[-2]
        return base.__dict__['family'].__get__(sock), base.__dict__['type'].__get__(sock) & 0xf
    except _Exception:
        return None


def _h_sock(S, event, args, cache, _type=type, _tuple=tuple, _int=int, _len=len, _tostr=_tostr,
            _check=_check_path, _net=_net_check, _unresolved=_net_unresolved, _parse=_parse_ip, _deny=_deny,
            _kind=_sock_kind, _bytearray=bytearray, _issubclass=issubclass, _str=str, _bytes=bytes):
    sock = args[0]
    addr = args[1]
    k = _kind(sock)
    if k is None:
        return None
    fam, typ = k
    verb = 'bind to' if event == 'socket.bind' else 'connection to'
    if fam == 1:  # AF_UNIX: the socket's path follows the file rules, and needs rw
        t = _type(addr)
        if not _issubclass(t, _str) and t is not _bytes:
            # The C socket read any other object through the buffer protocol
            # (a bytes subclass's __buffer__, a bytearray another thread may
            # change): what it read cannot be read again for sure.
            return _deny(S, 'network', S[13][2],
                         "Guard network %s a Unix socket whose path is not str or bytes DENIED by implicit default "
                         "policy: give the path as str or bytes." % verb, '', '', '', None, 111)
        s = _tostr(addr)
        if s is None:
            return None
        if s == '' or s.startswith('\0'):
            return _deny(S, 'network', S[13][2],
                         "Guard network connection to abstract Unix socket '%s' DENIED by implicit default policy." % s[1:],
                         s, '', '', None, 111)
        return _check(S, s, True, None, False, False, True, True)
    if fam != 2 and fam != 10:
        return None
    # The C socket takes a tuple subclass as a tuple (read by tuple's own
    # methods here, not the object's).
    if not _issubclass(_type(addr), _tuple) or _tuple.__len__(addr) < 2:
        return None
    h = _tuple.__getitem__(addr, 0)
    port = _tuple.__getitem__(addr, 1)
    if _issubclass(_type(h), _bytearray):
        # The C socket also takes a bytearray host: another thread may have
        # changed it since.
        return _deny(S, 'network', S[13][2],
                     "Guard network %s a host given as a bytearray DENIED by implicit default policy: give it as str "
                     "or bytes." % verb, '', '', '', None, 111)
    t = _type(h)
    host = _tostr(h) if _issubclass(t, _str) or _issubclass(t, _bytes) else None
    if host is None:
        return None  # the C socket refuses it
    if _type(port) is not _int:
        if not _issubclass(_type(port), _int):
            # The C socket took the port from the object's __index__ already;
            # asking it again could answer otherwise.
            return _deny(S, 'network', S[13][2],
                         "Guard network %s '[%s]' DENIED by implicit default policy: its port is not an int."
                         % (verb, host), '[%s]' % host, '', '', None, 111)
        port = _int.__add__(port, 0)  # the value itself, whatever the subclass says
    proto = 1 if typ == 1 else 2 if typ == 2 else 0
    if proto == 0:
        return None
    direction = 1 if event == 'socket.bind' else 2
    if host == '':
        host = '0.0.0.0' if fam == 2 else '::'
    elif host == '<broadcast>':
        host = '255.255.255.255'
    if _parse(host) is None:
        # A name given to the C socket itself (the socket module's methods
        # resolve it first, see _sock_call): the C resolver has picked the
        # address already, and the hook is not told which; for a pinned name
        # too (only the namespace providers' hosts file answers it with the
        # pinned addresses).
        return _unresolved(S, proto, direction, host, port, (4,) if fam == 2 else (4, 6), 'the socket',
                           'Resolve it first (socket.getaddrinfo answers with the addresses the rules judge) '
                           'and give the socket the address.')
    return _net(S, proto, direction, host, port)


def _sock_call(S, orig, x, a, k, _kind=_sock_kind, _tostr=_tostr, _parse=_parse_ip, _open=_net_open, _can=_net_can,
               _refuse=_net_refuse, _type=type, _tuple=tuple, _int=int, _len=len, _str=str, _lits={}):
    """The socket module's connect, connect_ex, bind, sendto and sendmsg (sealed
    wrappers, arm.py; x: (the address's position in the arguments, -1 for
    sendto's last, whether it binds, the layer's getaddrinfo)): a host name
    is resolved by the layer's getaddrinfo (the pinned addresses of a pinned
    name; a name no rule can allow refused before any query, for this
    direction; the answer judged, see _gai_judge), and the socket is given
    the first address of the answer, which the hook judges. Where every
    address is allowed the name goes on to the socket as it is (the C
    resolver picks; nothing to judge)."""
    pos, bind, gai = x
    if pos < 0:  # sendto(data[, flags], address)
        pos = _len(a) - 1 if _len(a) == 3 or _len(a) == 4 else 0
    if k or pos == 0 or _len(a) <= pos:
        return orig(*a, **k)
    addr = a[pos]
    if _type(addr) is not _tuple or _len(addr) < 2:
        return orig(*a)
    port = addr[1]
    host = addr[0]
    if _type(host) is _str:
        # An address goes on as it is (the hook judges it): known ones are
        # told at one lookup (the cache only saves parsing: it decides
        # nothing the hook does not judge again).
        lit = _lits.get(host)
        if lit is None:
            lit = _parse(host) is not None
            if _len(_lits) >= 1024:
                _lits.clear()
            _lits[host] = lit
        if lit:
            return orig(*a)
    else:
        host = _tostr(host)
    if host is None or host == '' or host == '<broadcast>' or _type(port) is not _int or _parse(host) is not None:
        return orig(*a)
    kd = _kind(a[0])
    if kd is None or (kd[0] != 2 and kd[0] != 10):
        return orig(*a)
    fam, typ = kd
    proto = 1 if typ == 1 else 2 if typ == 2 else 0
    direction = 1 if bind else 2
    fams = (4,) if fam == 2 else (4, 6)
    if proto == 0 or (not S[0] and _open(S, proto, port, direction, fams)):
        return orig(*a)
    key = host.lower().rstrip('.')
    if key not in S[5] and key != 'localhost':
        # Refused before any query, as getaddrinfo would, for this direction.
        can, deny = _can(S, proto, port, direction, fams)
        if not can:
            e = _refuse(S, proto, direction, host, None, port, deny)
            if e is not None:
                raise e
    res = gai(host, port, fam, typ, 0, 1 if bind else 0)
    out = None
    for e in res:
        if e[0] == fam and _type(e[4]) is _tuple and _len(e[4]) >= 2:
            out = e[4]
            break
    if out is None:
        return orig(*a)  # no address of the socket's family: the socket's own error
    addr = (out[0],) + addr[1:]
    return orig(*(a[:pos] + (addr,) + a[pos + 1:]))


def _h_resolve(S, event, args, cache, _tostr=_tostr, _parse=_parse_ip, _type=type, _int=int, _str=str,
               _bytes=bytes, _len=len, _can=_net_can, _refuse=_net_refuse, _deny=_deny):
    # A name no rule can allow is refused before any query leaves (a pinned
    # name is answered by the patched resolver; localhost by the hosts file).
    # gethostbyaddr resolves a name it is given before its reverse lookup.
    host = args[0]
    if S[0] or host is None:
        return None
    h = _tostr(host)
    if h is None or _parse(h) is not None:
        return None
    key = h.lower().rstrip('.')
    if key in S[5] or key == 'localhost' or key == '':
        return None
    port = None
    protos, fams = 3, (4, 6)
    if event == 'socket.getaddrinfo':
        p = args[1]
        if _type(p) is _bytes:
            p = p.decode('ascii', 'replace')
        if _type(p) is _int:
            port = p
        elif _type(p) is _str and p.isdigit() and p.isascii() and _len(p) <= 5:
            port = _int(p)
        if port == 0:
            port = None  # names no port: the program may connect to any
        fam, typ, pr = args[2], args[3] & 0xf, args[4]
        protos = 1 if typ == 1 else 2 if typ == 2 else 1 if pr == 6 else 2 if pr == 17 else 3
        fams = (4,) if fam == 2 else (4, 6)
    can, deny = _can(S, protos, port, 3, fams)
    if can:
        return None
    # The call does not say whether it connects or binds: a connection.
    proto = 2 if protos == 2 else 1
    if deny is not None:
        return _refuse(S, proto, 2, h, None, port, deny)
    return _refuse(S, proto, 2, h, None, port, None)


# ---------------------------------------------------------------- os.open

def _open_call(S, orig, path, flags, mode, k, _tostr=_tostr, _abspath=_abspath, _deny=_deny):
    """os.open (a sealed wrapper, arm.py): a relative path with dir_fd is opened
    by its absolute path, which the hook judges; one whose dir_fd cannot be
    resolved is refused, and reported as every refusal. k: the keyword
    arguments (dir_fd; any other is the original's to refuse)."""
    dir_fd = k.pop('dir_fd', None)
    if k:
        return orig(path, flags, mode, dir_fd=dir_fd, **k)
    s = _tostr(path)
    if s is not None and not s.startswith('/'):
        a = _abspath(s, dir_fd)
        if a is None:
            msg = "Access to '%s' must be accepted by a rule (its dir_fd cannot be resolved)." % s
            e = _deny(S, 'file', S[13][0], msg, s, '', '', None, 2)
            # Learning cannot record a path it cannot tell: refused too.
            raise e if e is not None else S[13][0](2, msg)
        return orig(a, flags, mode)
    return orig(path, flags, mode, dir_fd=dir_fd)


# ---------------------------------------------------------------- psycopg2
# psycopg2's connection is made by libpq (C) without any Python call: only the
# OS layer would see it, and its refusal would be libpq's, naming no rule. Its
# _connect is replaced by a sealed wrapper (arm.py) that calls this first: the
# targets libpq will connect to, read from the DSN (and the PG* variables libpq
# reads when the DSN leaves them out), are judged as a socket connect to them
# would be. A target named by pg_service.conf (service=, PGSERVICE) cannot be
# told here: the OS layer alone judges it.

_PG_SOCKET_DIR = '/var/run/postgresql'  # libpq's default (Debian's DEFAULT_PGSOCKET_DIR)


def _pg_param(p, env, key, var, _type=type, _bytes=bytes, _dict=dict, _enc=_FSENC):
    """The DSN's key, else libpq's environment variable var: read from the
    environment's own data (os.environ's reads are the program's, which
    learning records; these are the layer's)."""
    v = p.get(key)
    if v is None or v == '':
        v = env.get(var.encode(_enc), b'') if _type(env) is _dict else ''
        if _type(v) is _bytes:
            v = v.decode(_enc, 'surrogateescape')
    return v


def _pg_judge(S, parse, dsn, _unresolved=_net_unresolved, _net=_net_check, _parse=_parse_ip, _check=_check_path,
              _deny=_deny,
              _param=_pg_param, _modules=_sys.modules, _Exception=Exception, _len=len, _max=max, _range=range,
              _int=int, _str=str, _type=type, _dict=dict, _getattr=getattr, _dir=_PG_SOCKET_DIR):
    """(refusal, dsn): the refusal when a target of a psycopg2 connection with
    this DSN is refused (None in learning mode, after recording), else None
    and the DSN to give libpq: None to keep it, or the same with hostaddr=
    naming the address pinned for each pinned host name, so that libpq
    connects to the address judged (it still names the host, for TLS)."""
    try:
        p = parse(dsn if dsn is not None else '')
    except _Exception:
        return None, None  # libpq refuses the DSN itself
    if _type(p) is not _dict:
        return None, None
    osm = _modules.get('os')
    env = _getattr(_getattr(osm, 'environ', None), '_data', None)
    if _param(p, env, 'service', 'PGSERVICE'):
        return None, None
    hosts = _param(p, env, 'host', 'PGHOST')
    addrs = _param(p, env, 'hostaddr', 'PGHOSTADDR')
    ports = _param(p, env, 'port', 'PGPORT')
    hl = hosts.split(',') if hosts else ['']
    al = addrs.split(',') if addrs else []
    pl = ports.split(',') if ports else ['']
    ha = []
    pinned = False
    for i in _range(_max(_len(hl), _len(al))):
        h = hl[i].strip() if i < _len(hl) else ''
        a = al[i].strip() if i < _len(al) else ''
        ps = (pl[i] if i < _len(pl) else '') if _len(pl) > 1 else pl[0]
        ps = ps.strip() or '5432'
        if not ps.isdigit() or _len(ps) > 5:
            continue  # libpq refuses it
        port = _int(ps)
        ha.append(a)
        if a:
            e = _net(S, 1, 2, a, port)  # hostaddr: the address connected to
        elif h == '' or h.startswith('/'):
            e = _check(S, (h or _dir).rstrip('/') + '/.s.PGSQL.' + _str(port), True, None, False, False, True, True)
        elif h.startswith('@'):
            e = _deny(S, 'network', S[13][2],
                      "Guard network connection to abstract Unix socket '%s' DENIED by implicit default policy." % h[1:],
                      h, '', '', None, 111)
        elif h.lower().rstrip('.') == 'localhost' and h.lower().rstrip('.') not in S[5]:
            e = _net(S, 1, 2, '127.0.0.1', port)
        elif _parse(h) is not None:
            e = _net(S, 1, 2, h, port)
        elif h.lower().rstrip('.') in S[5]:
            e = _net(S, 1, 2, h, port)  # every address pinned for it; libpq is given the first
            ha[-1] = S[5][h.lower().rstrip('.')][0][2]
            pinned = True
        else:
            # libpq resolves the name itself: allowed where every address is.
            e = _unresolved(S, 1, 2, h, port, (4, 6), 'libpq',
                            'Pin the name with a rule of its own, or give libpq the address (hostaddr=).')
        if e is not None:
            return e, None
    if not pinned or S[0] or _len(ha) != _max(_len(hl), _len(al)):
        return None, None
    p['hostaddr'] = ','.join(ha)
    return None, ' '.join("%s='%s'" % (key, _str(v).replace('\\', '\\\\').replace("'", "\\'")) for key, v in p.items())


def _pg_connect_call(S, orig, parse, a, k, _judge=_pg_judge):
    e, dsn = _judge(S, parse, a[0] if a else k.get('dsn'))
    if e is not None:
        raise e
    if dsn is not None:
        if a:
            a = (dsn,) + a[1:]
        else:
            k['dsn'] = dsn
    return orig(*a, **k)


# ---------------------------------------------------------------- path functions
# Functions on paths without an audit event (os.stat and its kin, os.access,
# os.readlink, os.mkfifo, os.mknod, os.chroot), replaced by sealed wrappers
# (arm.py) that call this with the original: a path that is not exposed, or is
# ignored, looks absent through every door.

_PATH_WRITE = frozenset(('mkfifo', 'mknod', 'chroot'))
_PATH_ARG = {'access': 1, 'mkfifo': 1, 'mknod': 1, 'pathconf': 1}


def _isdir_path(canon, _stat=_posix.stat, _isdir=_stat.S_ISDIR, _OSError=OSError):
    """True when canon is a directory."""
    try:
        return _isdir(_stat(canon).st_mode)
    except _OSError:
        return False


def _path_quiet(S, ab, _getframe=_GETFRAME, _kind=_frame_kind, _lstat=_posix.lstat, _OSError=OSError):
    """True when a refused path is not worth reporting (nor learning): the
    import system probing its path, or a path that does not exist anyway."""
    f = _getframe(3)
    while f is not None and _kind(S, f.f_code) == 'ours':
        f = f.f_back
    fn = '' if f is None else f.f_code.co_filename
    del f
    if fn == '<frozen importlib._bootstrap_external>':
        return True
    try:
        _lstat(ab)
    except _OSError:
        return True
    return False


def _path_call(S, orig, cache, kind, a, k, _type=type, _int=int, _tostr=_tostr, _abspath=_abspath,
               _realpath=_realpath, _nofollow=_nofollow, _decide=_file_decide, _deny=_deny, _len=len,
               _write=_PATH_WRITE, _bool=bool, _quiet=_path_quiet, _ancestor=_ancestor, _ignored=_ignored,
               _meta=frozenset(('stat', 'lstat', 'access')), _lstat=_posix.lstat, _islnk=_stat.S_ISLNK,
               _OSError=OSError, _realpath_c=_realpath_c, _str=str, _isdir_p=_isdir_path):
    """os.<kind>(*a, **k), judged first. kind: stat, lstat, access, readlink,
    statvfs, pathconf, mkfifo, mknod, chroot. A directory above an exposed path
    exists (its name is on the way there: stat, lstat and access see it), its
    content stays hidden."""
    if not k and _len(a) == 1 and _type(a[0]) is _str and (a[0], False, kind != 'lstat', kind) in cache:
        return orig(*a)  # an absolute path already allowed (the key _abspath would give)
    if a:
        p = a[0]
    else:
        p = k.get('path')
    err = None
    s = None if p is None or _type(p) is _int else _tostr(p)
    if s:
        dir_fd = k.get('dir_fd')
        follow = k.get('follow_symlinks', True) and kind != 'lstat' and kind != 'readlink'
        write = kind in _write
        if kind == 'access':
            mode = a[1] if _len(a) > 1 else k.get('mode', 0)
            write = _type(mode) is _int and _bool(mode & 2)
        ab = _abspath(s, dir_fd)
        if ab is None:
            err = _deny(S, 'file', S[13][0],
                        "Access to '%s' must be accepted by a rule (its dir_fd cannot be resolved)." % s, s, '', '',
                        None, 2)
        else:
            key = (ab, write, follow, kind)
            if key not in cache:
                canon = _realpath_c(ab, cache) if follow else _nofollow(ab)
                d = kind == 'chroot'
                err = _decide(S, canon, write, ab, d, True)
                if err is not None and not write and kind in _meta and _ancestor(S, canon) and \
                        _ignored(S, canon) is None:
                    err = None
                elif S[0] and not write and kind in _meta and _isdir_p(canon):
                    # Learning: the metadata of a directory (a path walked
                    # through, realpath...) grants nothing; what is read in it is
                    # learned.
                    err = None
                elif (err is not None or S[0]) and (write or not _quiet(S, ab)):
                    err = _decide(S, canon, write, ab, d)
                if err is None and (kind == 'readlink' or not follow):
                    # A link to what is hidden is hidden too (a listing does not
                    # show it): what it names, and the link itself.
                    try:
                        link = _islnk(_lstat(ab).st_mode)
                    except _OSError:
                        link = False
                    if link:
                        err = _decide(S, _realpath(ab), False, ab, False)
                if err is None and not S[0] and kind not in _write:
                    if _len(cache) > 4096:
                        cache.clear()
                    cache[key] = None
    if err is not None:
        if kind == 'access':
            return False
        del S, orig, cache, a, k
        raise err
    if kind in _write:
        cache.clear()
    return orig(*a, **k)


# ---------------------------------------------------------------- import functions
# The program's import functions (builtins.__import__, importlib.import_module,
# importlib.__import__) and importlib's own _imp functions are replaced by sealed
# wrappers (arm.py) that call these with the original: a module already loaded
# raises no audit event, and a builtin module is made without one.

def _resolve_name(name, g, level, _tostr=_tostr, _type=type, _int=int, _isinstance=isinstance, _dict=dict,
                  _get=dict.get, _str=str, _join=''.join, _len=len):
    """The absolute name __import__(name, g, level=level) imports, or None when
    it cannot be told (the import system then decides alone)."""
    n = _tostr(name)
    if n is None:
        return None
    if _type(level) is not _int:
        if not _isinstance(level, _int):
            return None
        level = _int.__index__(level)
    if level <= 0:
        return n
    if not _isinstance(g, _dict):
        return None
    pkg = _get(g, '__package__')
    if not _isinstance(pkg, _str) or not pkg:
        return None
    bits = _join((pkg,)).rsplit('.', level - 1)
    if _len(bits) < level:
        return None
    return bits[0] + '.' + n if n else bits[0]


def _import_call(S, orig, request, name, g=None, l=None, fromlist=(), level=0, _getframe=_GETFRAME,
                 _resolve=_resolve_name, _check=_import_check, _type=type, _int=int, _str=str):
    """builtins.__import__ (and importlib.__import__): the import statement and
    __import__ calls, judged whether the module is loaded or not. request: a
    library's function that imports what its caller names (logging.config)."""
    if level == 0 and _type(level) is _int and _type(name) is _str:
        full = name
    else:
        full = _resolve(name, g, level)
    if full is not None:
        top = full.partition('.')[0]
        if S[6] is None and top not in S[7] and top not in S[20][4]:
            f = _getframe(2)
            e = _check(S, full, f, request)
            del f
            if e is not None:
                del S, orig, g, l
                raise e
    return orig(name, g, l, fromlist, level)


def _import_module_call(S, orig, name, package=None, _getframe=_GETFRAME, _tostr=_tostr,
                        _resolve=_resolve_name, _check=_import_check, _len=len):
    """importlib.import_module: the program names the module."""
    n = _tostr(name)
    if n is not None:
        level = _len(n) - _len(n.lstrip('.'))
        full = n
        if level:
            p = _tostr(package)
            full = None if p is None else _resolve(n[level:], {'__package__': p}, level)
        if full is not None:
            f = _getframe(2)
            e = _check(S, full, f, True)
            del f
            if e is not None:
                del S, orig, package
                raise e
    return orig(name, package)


def _builtin_call(S, orig, patch, spec, _getframe=_GETFRAME, _tostr=_tostr, _check=_import_check,
                  _getattr=getattr, _TypeError=TypeError):
    """_imp.create_builtin(spec): a builtin module is made (a new copy when it is
    already loaded): judged on the request of whoever asks, then patched."""
    n = _tostr(_getattr(spec, 'name', None))
    if n is None:
        raise _TypeError('create_builtin: the spec has no name')
    f = _getframe(2)
    e = _check(S, n, f, True)
    del f
    if e is not None:
        del S, orig, patch, spec
        raise e
    m = orig(S[20][10](n, None))
    patch(n, m)
    return m


def _dynamic_call(S, orig, patch, spec, *rest, _getframe=_GETFRAME, _getattr=getattr, _tostr=_tostr,
                  _mod=_mod_of):
    """_imp.create_dynamic(spec): the import audit event judges it; the module
    (a new copy when it is already loaded) is patched."""
    m = orig(spec, *rest)
    n = _tostr(_getattr(spec, 'origin', None))
    n = _mod(S, n) if n is not None else None
    if n is None:
        n = _tostr(_getattr(m, '__name__', None))
    if n is not None:
        patch(n, m)
    return m


def _exec_ext_call(S, orig, patch, mod, _getattr=getattr, _tostr=_tostr):
    """_imp.exec_builtin / exec_dynamic(mod): a multi-phase module's functions
    appear when it is executed: patched then."""
    r = orig(mod)
    n = _tostr(_getattr(mod, '__name__', None))
    if n is not None:
        patch(n, mod)
    return r


def _frozen_call(S, orig, name, *rest, _getframe=_GETFRAME, _importer=_importer, _deny=_deny):
    """_imp.get_frozen_object(name, data): code from data the program gives would
    be named <frozen ...>, a library's code."""
    if rest and rest[0] is not None:
        f = _getframe(2)
        g = _importer(S, f, '', '', True)
        del f
        if g is not None:
            del g
            e = _deny(S, 'api', S[13][4], "Loading frozen code from the program's data is DENIED by implicit "
                      "default policy.", '', '', '', None)
            if e is not None:
                del S, orig, rest
                raise e
    return orig(name, *rest)


def _fixname_call(S, orig, code, path, _getframe=_GETFRAME, _tostr=_tostr, _library=_library_file,
                  _genuine=_genuine_load, _deny=_deny):
    """_imp._fix_co_filename(code, path): the import system renames the code it
    loaded from a compiled file; only its own load of a library file may give a
    library file's name."""
    p = _tostr(path)
    if p is not None and _library(S, p):
        f = _getframe(2)
        ok = _genuine(S, f)
        del f
        if not ok:
            e = _deny(S, 'api', S[13][4], "Naming code as the library file '%s' is DENIED by implicit default "
                      "policy." % p, p, '', '', None)
            if e is not None:
                del S, orig, code
                raise e
    return orig(code, path)


def _hook(S, event, args, _get=None, _cache=None, _type=type, _str=str):
    """The audit hook (bound to S): one lookup for the events it ignores; an
    open() of an absolute path already allowed (the same path, mode and flags)
    is one lookup too."""
    if event == 'open' and _type(args[0]) is _str and args in _cache:
        return
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
    'import': _h_import, 'pickle.find_class': _h_findclass,
    'exec': _h_code, 'compile': _h_compile, 'marshal.loads': _h_marshal,
    'code.__new__': _h_codenew, 'function.__new__': _h_funcnew,
    'socket.connect': _h_sock, 'socket.bind': _h_sock, 'socket.sendto': _h_sock, 'socket.sendmsg': _h_sock,
    'socket.getaddrinfo': _h_resolve, 'socket.gethostbyname': _h_resolve, 'socket.gethostbyaddr': _h_resolve,
    'sqlite3.connect': _h_sqlite,
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
    'pickle': {'loads': 'pickle.loads', 'load': 'pickle.load', '_loads': 'pickle._loads', '_load': 'pickle._load'},
    '_pickle': {'loads': 'pickle.loads', 'load': 'pickle.load'},
    # threading.settrace and setprofile only record a function for the threads
    # started later (sys.settrace then runs in each new thread, with no door of
    # the caller on its stack): judged when they are called.
    'threading': {'stack_size': 'threading.stack_size', '_start_new_thread': '_thread.start_new_thread',
                  'settrace': 'threading.settrace', 'setprofile': 'threading.setprofile',
                  'settrace_all_threads': 'threading.settrace_all_threads',
                  'setprofile_all_threads': 'threading.setprofile_all_threads'},
    # 3.12+: subprocess keeps fork_exec as _fork_exec (bound when subprocess was
    # imported, possibly before the guard was armed).
    'subprocess': {'_fork_exec': '_posixsubprocess.fork_exec'},
    # ctypes.cast and string_at read memory at any address: refused before any
    # foreign call is made.
    'ctypes': {'cast': 'ctypes.cast', 'string_at': 'ctypes.string_at', 'wstring_at': 'ctypes.wstring_at'},
    # The audit event of sys.addaudithook is raised inside it, where CPython
    # swallows any RuntimeError (every refusal of the layer is one): refused
    # before, where the program sees it.
    'sys': {'addaudithook': 'sys.addaudithook'},
}

# Methods patched on their class: module -> {(class, method): registered name}.
METHOD_PATCHES = {
    # The pure-Python unpickler (pickle._Unpickler(file).load()) runs what a
    # stream names without the C unpickler's find_class event for pure data.
    'pickle': {('_Unpickler', 'load'): 'pickle._Unpickler'},
}

# The functions on the hook's path (every function of this module): none of
# them may read a global name.
HOOK_PATH = tuple(n for n, v in globals().items() if type(v) is type(_json))
