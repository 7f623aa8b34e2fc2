"""Functions called by the tests of Sandbox.Call (partial mode)."""

import asyncio
import os
import sys

INIT_COUNT = [0]


def noop():
    return None


def echo(*args, **kwargs):
    return [list(args), kwargs]


def ident(x):
    return x


def add(a, b=10):
    return a + b


def types_of(*args):
    return [type(a).__module__ + '.' + type(a).__qualname__ for a in args]


def make_values():
    import datetime, decimal, fractions, uuid, pathlib, ipaddress, collections
    return {
        'none': None, 'bool': True, 'int': -7, 'big': 2**100, 'float': 1.5, 'complex': 1+2j,
        'str': 'héllo', 'bytes': b'\x00\xff', 'bytearray': bytearray(b'ab'),
        'list': [1, [2]], 'tuple': (1, 'a'), 'set': {3}, 'frozenset': frozenset({4}),
        'date': datetime.date(2024, 2, 29), 'time': datetime.time(1, 2, 3, 4),
        'datetime': datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=1), 'X')),
        'timedelta': datetime.timedelta(days=-1, seconds=5), 'decimal': decimal.Decimal('-1.50'),
        'fraction': fractions.Fraction(3, 4), 'uuid': uuid.UUID(int=5), 'path': pathlib.PurePosixPath('/a/b'),
        'ip4': ipaddress.ip_address('1.2.3.4'), 'ip6': ipaddress.ip_address('::1'),
        'net': ipaddress.ip_network('10.0.0.0/8'), 'iface': ipaddress.ip_interface('fe80::1/64'),
        'od': collections.OrderedDict([('a', 1)]), 'counter': collections.Counter('aab'),
        'deque': collections.deque([1, 2], maxlen=3), 'range': range(1, 10, 2),
        (1, 2): 'tuple key', frozenset({1}): 'frozenset key',
    }


def talk(n):
    for i in range(n):
        print('out', i)
        print('err', i, file=sys.stderr)
    return n


async def async_add(a, b):
    await asyncio.sleep(0.001)
    return a + b


def gen():
    yield 1


def boom(msg):
    raise ValueError(msg)


def chained():
    try:
        open('/etc/shadow')
    except OSError as e:
        raise RuntimeError('could not read the secret') from e


def read_file(path):
    with open(path) as f:
        return f.read()


def connect(host, port):
    import socket
    s = socket.create_connection((host, port), timeout=5)
    s.close()
    return 'connected to %s:%d' % (host, port)


def pid():
    return os.getpid()


def sleep(seconds):
    import time
    time.sleep(seconds)
    return seconds


def init():
    INIT_COUNT[0] += 1
    print('init ran')


async def async_init():
    await asyncio.sleep(0)
    INIT_COUNT[0] += 1


def init_count():
    return INIT_COUNT[0]


def failing_init():
    raise RuntimeError('init failed on purpose')


def big(n):
    return bytes(n)


def garbage():
    os.write(3, b'\x00\x00\x00\x05\x63abcd')
    import time
    time.sleep(10)


def huge_frame():
    os.write(3, (1 << 30).to_bytes(4, 'big') + bytes((23,)))
    import time
    time.sleep(10)


def forged_result(call_id, data):
    # The forged frame, then the worker ends before it can answer itself.
    os.write(3, (len(data) + 9).to_bytes(4, 'big') + bytes((23,)) + call_id.to_bytes(8, 'big') + data)
    os._exit(0)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


def point():
    return Point(1, 2)


def cyclic():
    l = []
    l.append(l)
    return l


def unpicklable():
    return lambda: 1


def exit_call():
    raise SystemExit(3)


class Calc:
    @staticmethod
    def double(x):
        return 2 * x


def crash():
    os._exit(7)


def imports_json():
    import json
    return json.dumps([1])


def print_then_wait(seconds):
    print('started', flush=True)
    import time
    time.sleep(seconds)
    return 'done'


def shout(n):
    sys.stdout.write('x' * n)
    return n


def write_file(path, text):
    with open(path, 'w') as f:
        f.write(text)


def swallow_denial(path):
    try:
        open(path)
    except OSError:
        return 'swallowed'


def print_and_raise(msg):
    print('before', msg)
    print('warning', msg, file=sys.stderr)
    raise ValueError(msg)


def raw_fd(text):
    # Straight to descriptors 1 and 2, as C code or a child process would.
    os.write(1, ('raw out ' + text + '\n').encode())
    os.write(2, ('raw err ' + text + '\n').encode())
    return text
