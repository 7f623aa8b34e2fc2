# The JSON oracle of transport.JSON: builds Python values, pickles each with
# protocol 5, and writes, one JSON line per case, its name, its pickle (base64)
# and the JSON text the conversion must give, computed here from the Python
# value itself (an implementation of the table of transport.JSON independent of
# the Go one).
import base64, collections, datetime, decimal, fractions, ipaddress, json
import math, pathlib, pickle, sys, uuid


class Point:
    def __init__(self):
        self.x = 1
        self.y = [1.5, "two"]


class Bag(list):
    pass


class Table(dict):
    pass


def emit_float(f):
    if math.isnan(f):
        return '"NaN"'
    if math.isinf(f):
        return '"Infinity"' if f > 0 else '"-Infinity"'
    return repr(f)


def emit_offset(td):
    # The offset as isoformat() writes it, from a time carrying it.
    return datetime.time(0, tzinfo=datetime.timezone(td)).isoformat()[len("00:00:00"):]


def emit_clock(v):
    # isoformat() without the zone, and a zoneinfo zone as "[key]".
    try:
        from zoneinfo import ZoneInfo
    except ImportError:
        ZoneInfo = ()
    if isinstance(v.tzinfo, ZoneInfo):
        return v.replace(tzinfo=None).isoformat() + "[" + v.tzinfo.key + "]"
    return v.isoformat()


def emit_seconds(td):
    us = td // datetime.timedelta(microseconds=1)
    sign = "-" if us < 0 else ""
    q, r = divmod(abs(us), 10**6)
    s = str(q)
    if r:
        s += "." + ("%06d" % r).rstrip("0")
    return sign + s


def emit_pairs(items):
    items = list(items)
    if all(type(k) is str for k, _ in items):
        return "{" + ",".join(json.dumps(k) + ":" + emit(x) for k, x in items) + "}"
    return "[" + ",".join("[" + emit(k) + "," + emit(x) + "]" for k, x in items) + "]"


def emit(v):
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return emit_float(v)
    if isinstance(v, complex):
        return '{"real":%s,"imag":%s}' % (emit_float(v.real), emit_float(v.imag))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (bytes, bytearray)):
        return json.dumps(base64.b64encode(v).decode())
    if type(v) in (Bag, Table):
        out = '{"__class__":"__main__.%s","args":[],"state":null' % type(v).__name__
        if type(v) is Bag:
            return out + ',"listitems":' + emit(list(v)) + "}"
        return out + ',"dictitems":' + emit_pairs(v.items()) + "}"
    if isinstance(v, dict):
        return emit_pairs(v.items())
    if isinstance(v, (list, tuple, set, frozenset, collections.deque)):
        return "[" + ",".join(emit(x) for x in v) + "]"
    if isinstance(v, (decimal.Decimal, fractions.Fraction, uuid.UUID, pathlib.PurePath)):
        return json.dumps(str(v))
    if isinstance(v, ipaddress.IPv6Address) and v.ipv4_mapped:
        # RFC 5952's form (Python 3.13's str; 3.11 writes ::ffff:102:304).
        return json.dumps("::ffff:" + str(v.ipv4_mapped))
    if isinstance(v, (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network,
                      ipaddress.IPv6Network, ipaddress.IPv4Interface, ipaddress.IPv6Interface)):
        return json.dumps(str(v))
    if isinstance(v, (datetime.datetime, datetime.time)):
        return json.dumps(emit_clock(v))
    if isinstance(v, datetime.date):
        return json.dumps(v.isoformat())
    if isinstance(v, datetime.timedelta):
        return emit_seconds(v)
    if isinstance(v, datetime.timezone):
        return json.dumps(emit_offset(v.utcoffset(None)))
    if isinstance(v, range):
        return '{"start":%d,"stop":%d,"step":%d}' % (v.start, v.stop, v.step)
    if isinstance(v, Point):
        return '{"__class__":"__main__.Point","args":[],"state":' + emit_pairs(vars(v).items()) + "}"
    if v is Point:
        return '{"__global__":"__main__.Point"}'
    raise TypeError(type(v))


tz = datetime.timezone
td = datetime.timedelta
cases = {
    "none": None, "true": True, "false": False,
    "int": -12345, "int64_max": 2**63 - 1, "bigint": 2**100 + 7, "neg_bigint": -(2**70),
    "float": 0.1, "float_int": 3.0, "float_neg_zero": -0.0, "float_1e16": 1e16,
    "float_1e15": 1234567890123456.0, "float_small": 1.5e-05, "float_0001": 0.0001,
    "float_big": 1.7976931348623157e308, "float_tiny": 5e-324,
    "nan": float("nan"), "inf": float("inf"), "neg_inf": float("-inf"),
    "complex": complex(1.5, -2.0), "complex_nan": complex(float("nan"), float("inf")),
    "str": "plain", "str_escapes": 'q"b\\s/ n\n t\t c\x01 d\x7f <>& \u2028\u2029 é 😀',
    "str_surrogate": "a\udc80b\ud800", "str_empty": "",
    "bytes": b"\x00\xffbinary\n", "bytes_empty": b"", "bytearray": bytearray(b"xyz"),
    "list": [1, [2, [3, []]], "x"], "tuple": (1, (2,), ()), "set": {1, 2, 3},
    "frozenset": frozenset({"a"}), "deque": collections.deque([1, "b"], maxlen=5),
    "dict": {"a": 1, "b": [1.5, None], "c": {"d": True}}, "dict_empty": {},
    "dict_int_keys": {1: "one", 2: "two"}, "dict_mixed_keys": {"a": 1, 2: "b", (3, 4): None},
    "dict_tuple_keys": {(1, "x"): {frozenset({1}): 2}},
    "ordereddict": collections.OrderedDict([("z", 1), ("a", 2)]),
    "counter": collections.Counter("abracadabra"),
    "decimal": decimal.Decimal("1.50"), "decimal_exp": decimal.Decimal("-1.5E+3"),
    "decimal_nan": decimal.Decimal("NaN"), "decimal_inf": decimal.Decimal("-Infinity"),
    "fraction": fractions.Fraction(3, 4), "fraction_int": fractions.Fraction(6, 3),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "posixpath": pathlib.PurePosixPath("/a/b c"), "path_rel": pathlib.PosixPath("rel/x"),
    "windowspath": pathlib.PureWindowsPath("C:/x/y"), "path_empty": pathlib.PurePosixPath(""),
    "ipv4": ipaddress.IPv4Address("192.0.2.7"), "ipv6": ipaddress.IPv6Address("2001:db8::1"),
    "ipv6_mapped": ipaddress.IPv6Address("::ffff:1.2.3.4"),
    "ipv4_net": ipaddress.IPv4Network("10.0.0.0/8"), "ipv6_iface": ipaddress.IPv6Interface("2001:db8::1/64"),
    "ipv4_iface": ipaddress.IPv4Interface("10.1.2.3/24"),
    "date": datetime.date(2024, 2, 29), "date_old": datetime.date(9, 1, 2),
    "time": datetime.time(1, 2, 3), "time_us": datetime.time(23, 59, 59, 1),
    "time_tz": datetime.time(1, 2, 3, 4, tzinfo=tz(td(hours=5, minutes=30))),
    "time_tz_secs": datetime.time(1, 2, tzinfo=tz(-td(hours=5, minutes=30, seconds=15, microseconds=7))),
    "datetime": datetime.datetime(2024, 2, 29, 10, 30), "datetime_utc": datetime.datetime(2000, 1, 1, tzinfo=tz.utc),
    "datetime_named_tz": datetime.datetime(2000, 1, 1, 12, 0, 0, 5, tzinfo=tz(td(hours=-3), "BRT")),
    "timedelta": td(days=-1, seconds=5, microseconds=10), "timedelta_zero": td(0),
    "timedelta_hour": td(hours=1), "timedelta_max": td.max, "timedelta_min": td.min,
    "timedelta_neg_us": td(microseconds=-1), "timedelta_frac": td(seconds=1, microseconds=500000),
    "timezone": tz(td(hours=-2)), "timezone_utc": tz.utc,
    "range": range(0, 10, 3), "range_neg": range(5, -5, -2),
    "records": [{"id": i, "name": "n%d" % i, "score": i / 4, "tags": ("a", "b"), "ok": i % 2 == 0} for i in range(5)],
    "object": Point(), "global": Point, "bag": Bag([1, "x"]), "table": Table(a=1, b=[2]),
}
try:
    from zoneinfo import ZoneInfo
    paris = ZoneInfo("Europe/Paris")
    cases["zoneinfo"] = paris
    cases["datetime_zoneinfo"] = datetime.datetime(2024, 7, 1, 12, 0, tzinfo=paris)
except Exception:
    pass

for name, v in cases.items():
    if name == "zoneinfo":
        want = json.dumps(v.key)
    else:
        want = emit(v)
    line = {"name": name, "pickle": base64.b64encode(pickle.dumps(v, protocol=5)).decode(), "json": want}
    sys.stdout.write(json.dumps(line) + "\n")
