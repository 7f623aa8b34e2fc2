# Round-trip oracle for transport's pickle tests: real CPython, no mock.
#
# stdin: JSON {"values": [DESC...], "go": [B64...], "eq": [[DESC, DESC]...]}
#   DESC is a tagged description of a value (see build); go[i] is the Go encoder's
#   pickle of values[i].
# stdout: JSON {"pickles": [[B64 x 8]...], "go": [null | "error"...], "eq": [bool...]}
#   pickles[i] = C pickler protocols 2,3,4,5, then (for every 4th value, to keep the
#   test fast) the pure-Python pickler's protocols 2,3,4,5;
#   go[i] is null when pickle.loads(go[i]) (C unpickler, and the Python one for every
#   4th value) equals build(values[i]) exactly (same types, recursively), else a
#   message.
import base64
import collections
import datetime
import decimal
import fractions
import io
import ipaddress
import json
import pathlib
import pickle
import struct
import sys
import uuid
import zoneinfo


def b64(b):
    return base64.b64encode(b).decode()


def unb64(s):
    return base64.b64decode(s)


def fbits(h):
    return struct.unpack(">d", bytes.fromhex(h))[0]


def build_tz(d):
    if d is None:
        return None
    if d[0] == "timezone":
        off = datetime.timedelta(microseconds=d[1])
        return datetime.timezone(off) if d[2] is None else datetime.timezone(off, d[2])
    return zoneinfo.ZoneInfo(d[1])


def build(d):
    t = d[0]
    if t == "none":
        return None
    if t == "bool":
        return d[1]
    if t == "int":
        return int(d[1])
    if t == "float":
        return fbits(d[1])
    if t == "complex":
        return complex(fbits(d[1]), fbits(d[2]))
    if t == "str":
        return unb64(d[1]).decode("utf-8", "surrogatepass")
    if t == "bytes":
        return unb64(d[1])
    if t == "bytearray":
        return bytearray(unb64(d[1]))
    if t == "list":
        return [build(e) for e in d[1]]
    if t == "tuple":
        return tuple(build(e) for e in d[1])
    if t == "set":
        return set(build(e) for e in d[1])
    if t == "frozenset":
        return frozenset(build(e) for e in d[1])
    if t == "dict":
        return {build(k): build(v) for k, v in d[1]}
    if t == "odict":
        return collections.OrderedDict((build(k), build(v)) for k, v in d[1])
    if t == "counter":
        return collections.Counter({build(k): build(v) for k, v in d[1]})
    if t == "deque":
        return collections.deque((build(e) for e in d[1]), d[2])
    if t == "date":
        return datetime.date(*d[1:4])
    if t == "time":
        return datetime.time(*d[1:5], tzinfo=build_tz(d[6]), fold=d[5])
    if t == "datetime":
        return datetime.datetime(*d[1:8], tzinfo=build_tz(d[9]), fold=d[8])
    if t == "timedelta":
        return datetime.timedelta(days=d[1], seconds=d[2], microseconds=d[3])
    if t == "tz":
        return build_tz(d[1])
    if t == "decimal":
        return decimal.Decimal(d[1])
    if t == "fraction":
        return fractions.Fraction(int(d[1]), int(d[2]))
    if t == "uuid":
        return uuid.UUID(hex=d[1])
    if t == "path":
        return getattr(pathlib, d[1])(*d[2])
    if t == "ip":
        return ipaddress.ip_address(d[1]) if d[2] == 4 else ipaddress.IPv6Address(d[1])
    if t == "ipnet":
        return getattr(ipaddress, d[1])(d[2])
    if t == "range":
        return range(d[1], d[2], d[3])
    raise ValueError("unknown description %r" % (t,))


def canon_tz(z):
    if z is None:
        return None
    if type(z) is datetime.timezone:
        return ("timezone", z.__getinitargs__())
    return ("zoneinfo", type(z).__name__, z.key)


def canon(x):
    t = type(x)
    if x is None or t in (bool, int, str, bytes, bytearray):
        return (t.__name__, x)
    if t is float:
        return ("float", struct.pack(">d", x))
    if t is complex:
        return ("complex", struct.pack(">dd", x.real, x.imag))
    if t in (list, tuple):
        return (t.__name__, tuple(canon(e) for e in x))
    if t in (set, frozenset):
        return (t.__name__, tuple(sorted(repr(canon(e)) for e in x)))
    if t in (dict, collections.OrderedDict, collections.Counter):
        return (t.__name__, tuple((canon(k), canon(v)) for k, v in x.items()))
    if t is collections.deque:
        return ("deque", x.maxlen, tuple(canon(e) for e in x))
    if t is datetime.datetime:
        return ("datetime", x.year, x.month, x.day, x.hour, x.minute, x.second,
                x.microsecond, x.fold, canon_tz(x.tzinfo))
    if t is datetime.time:
        return ("time", x.hour, x.minute, x.second, x.microsecond, x.fold, canon_tz(x.tzinfo))
    if t is datetime.date:
        return ("date", x.year, x.month, x.day)
    if t is datetime.timedelta:
        return ("timedelta", x.days, x.seconds, x.microseconds)
    if t in (datetime.timezone, zoneinfo.ZoneInfo):
        return canon_tz(x)
    if t is decimal.Decimal:
        return ("decimal", str(x))
    if t is fractions.Fraction:
        return ("fraction", x.numerator, x.denominator)
    if t is uuid.UUID:
        return ("uuid", x.int)
    if isinstance(x, pathlib.PurePath):
        return (t.__name__, str(x))
    if t in (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network,
             ipaddress.IPv6Network, ipaddress.IPv4Interface, ipaddress.IPv6Interface):
        return (t.__name__, str(x))
    if t is range:
        return ("range", x.start, x.stop, x.step)
    raise TypeError("no canonical form for %r" % (t,))


def py_dumps(v, proto):
    f = io.BytesIO()
    pickle._Pickler(f, proto).dump(v)
    return f.getvalue()


def main():
    req = json.load(sys.stdin)
    out = {"pickles": [], "go": [], "eq": []}
    for i, d in enumerate(req["values"]):
        v = build(d)
        ps = [pickle.dumps(v, p) for p in (2, 3, 4, 5)]
        if i % 4 == 0:
            ps += [py_dumps(v, p) for p in (2, 3, 4, 5)]
        out["pickles"].append([b64(p) for p in ps])
        gp = unb64(req["go"][i])
        msg = None
        try:
            want = canon(v)
            loaders = [("C", pickle.loads)]
            if i % 4 == 0:
                loaders.append(("Python", pickle._loads))
            for name, load in loaders:
                got = canon(load(gp))
                if got != want:
                    msg = "%s unpickler: got %r, want %r" % (name, got, want)
                    break
        except Exception as e:
            msg = "%s: %s" % (type(e).__name__, e)
        out["go"].append(msg)
    for a, b in req["eq"]:
        x, y = build(a), build(b)
        out["eq"].append(bool(x == y and hash(x) == hash(y)))
    json.dump(out, sys.stdout)


main()
