# Writes the CPython pickles that transport's tests and fuzz seeds use, next to this
# file (*.pkl). Run with the real interpreter (3.11 here):
#   /usr/bin/python3 transport/testdata/pickle/fixtures.py
import collections
import copyreg
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import io
import ipaddress
import os
import pathlib
import pickle
import sys
import uuid
import zoneinfo

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, data):
    with open(os.path.join(HERE, name + ".pkl"), "wb") as f:
        f.write(data)


class Gadget:
    def __reduce__(self):
        return (os.system, ("true",))


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Color(enum.Enum):
    RED = 1


Pair = collections.namedtuple("Pair", "a b")

# Refused constructs.
for proto in (0, 1, 2, 5):
    write("os_system_p%d" % proto, pickle.dumps(Gadget(), proto))
write("partial", pickle.dumps(functools.partial(len), 5))
write("app_class", pickle.dumps(Point(1, 2), 5))
write("enum", pickle.dumps(Color.RED, 5))
write("namedtuple", pickle.dumps(Pair(1, "x"), 5))
write("odict_app", pickle.dumps(collections.OrderedDict(p=Point(3, 4)), 5))
write("bare_class", pickle.dumps(datetime.date, 5))

copyreg.add_extension("posix", "system", 240)
copyreg.add_extension("posix", "getcwd", 300)
copyreg.add_extension("posix", "getpid", 70000)
write("ext1", pickle.dumps(Gadget(), 2))
write("ext2", pickle.dumps(os.getcwd, 2))
write("ext4", pickle.dumps(os.getpid, 2))
copyreg.remove_extension("posix", "system", 240)
copyreg.remove_extension("posix", "getcwd", 300)
copyreg.remove_extension("posix", "getpid", 70000)


class PersPickler(pickle.Pickler):
    def persistent_id(self, obj):
        return "secret" if obj == "ref" else None


for proto in (0, 2):
    f = io.BytesIO()
    PersPickler(f, proto).dump(["ref"])
    write("persid_p%d" % proto, f.getvalue())

write("oob_buffer", pickle.dumps(pickle.PickleBuffer(b"abc"), 5, buffer_callback=lambda b: False))

# Cycles and sharing.
lst = []
lst.append(lst)
write("cycle_list", pickle.dumps(lst, 5))
d = {}
d["self"] = d
write("cycle_dict", pickle.dumps(d, 5))
inner = []
tup = (inner,)
inner.append(tup)
write("cycle_tuple", pickle.dumps(tup, 2))
p = Point(0, 0)
p.x = p
write("cycle_object", pickle.dumps(p, 5))
shared = [1, 2]
write("shared", pickle.dumps([shared, shared, (shared,)], 5))

# Depth.
sys.setrecursionlimit(20000)
deep = []
for _ in range(1100):
    deep = [deep]
write("deep_1100", pickle.dumps(deep, 5))
write("bigint", pickle.dumps(2 ** 100000, 5))

# One value of every type, each protocol (fuzz seeds, decoder tests).
tz = datetime.timezone(datetime.timedelta(hours=-5, microseconds=7), "X")
every = {
    "none": None, "bool": True, "int": -(2 ** 40), "big": 3 ** 300, "float": 1.5,
    "complex": 1 - 2j, "str": "h\u00e9\U0001f600", "bytes": b"\x00\xff", "bytearray": bytearray(b"ab"),
    "list": [1, [2]], "tuple": (1, (2, 3), (), (4,), (5, 6, 7, 8)), "set": {1, "a"}, "frozenset": frozenset({(1, 2)}),
    "odict": collections.OrderedDict(b=1, a=2), "counter": collections.Counter("hello"),
    "deque": collections.deque([1, 2, 3], maxlen=5), "deque2": collections.deque(),
    "date": datetime.date(2024, 2, 29), "time": datetime.time(23, 59, 59, 999999, tzinfo=tz, fold=1),
    "datetime": datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc),
    "zoned": datetime.datetime(2024, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    "timedelta": datetime.timedelta(days=-3, microseconds=1), "tz": tz,
    "decimal": decimal.Decimal("-1.50E+3"), "fraction": fractions.Fraction(-3, 4), "uuid": uuid.UUID(int=12345),
    "paths": [pathlib.PurePosixPath("/a/b"), pathlib.PosixPath("rel"), pathlib.PureWindowsPath("c:/x/y")],
    "ip": [ipaddress.ip_address("10.1.2.3"), ipaddress.ip_address("::1"), ipaddress.ip_network("10.0.0.0/8"),
           ipaddress.ip_interface("fe80::1/64")],
    "range": range(1, 10, 3), (1, "k"): frozenset(),
}
for proto in (2, 3, 4, 5):
    write("every_p%d" % proto, pickle.dumps(every, proto))
