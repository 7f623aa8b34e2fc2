# The JSON text of plain data, shared by the Python layer's Call worker and eval
# zygote (appended to wire.py) and by the eval guard (appended to
# pysandboxes_evalguard.py): each copy is part of its module's own code. It
# spares the json module's import, and keeps its own references to the builtins
# it calls (bound when the module runs, before any program does).


def to_json(o, _type=type, _str=str, _repr=repr, _reversed=reversed, _enumerate=enumerate, _ord=ord):
    """JSON text of plain data (str, int, float, bool, None, list, tuple, dict;
    anything else as the string of its repr), iterative; lone surrogates are
    escaped (\\udxxx), so the text always encodes to UTF-8."""
    out = []
    stack = [o]
    table = _JSON_TABLE
    while stack:
        o = stack.pop()
        t = _type(o)
        if t is _JSONPunct:
            out.append(o.s)
        elif t is str:
            s = o.translate(table)
            if not s.isascii():
                try:
                    s.encode('utf-8')
                except UnicodeEncodeError:
                    s = ''.join('\\u%04x' % _ord(c) if '\ud800' <= c <= '\udfff' else c for c in s)
            out.append('"' + s + '"')
        elif o is None:
            out.append('null')
        elif t is bool:
            out.append('true' if o else 'false')
        elif t is int:
            out.append(_repr(o))
        elif t is float:
            out.append(_repr(o) if o == o and o not in (float('inf'), float('-inf')) else 'null')
        elif t is list or t is tuple:
            out.append('[')
            stack.append(_JSONPunct(']'))
            items = []
            for i, x in _enumerate(o):
                if i:
                    items.append(_JSONPunct(','))
                items.append(x)
            stack.extend(_reversed(items))
        elif t is dict:
            out.append('{')
            stack.append(_JSONPunct('}'))
            items = []
            for i, (k, v) in _enumerate(o.items()):
                if i:
                    items.append(_JSONPunct(','))
                items.append(_str(k))
                items.append(_JSONPunct(':'))
                items.append(v)
            stack.extend(_reversed(items))
        else:
            out.append('"' + _repr(o).translate(table) + '"')
    return ''.join(out)


_json = to_json


class _JSONPunct:
    """Punctuation on to_json's stack, written as it is."""
    __slots__ = ('s',)

    def __init__(self, s):
        self.s = s


_JSON_TABLE = {i: '\\u%04x' % i for i in range(32)}
_JSON_TABLE[ord('"')] = '\\"'
_JSON_TABLE[ord('\\')] = '\\\\'
