# The JSON text of plain data, shared by the Python layer's guard (before
# guard.py), its Call worker and eval zygote (after wire.py) and by the eval
# guard (after pysandboxes_evalguard.py): each copy is part of its module's own
# code. It spares the json module's import. It reads no global name: the
# builtins, the escape table and the punctuation class it uses are positional
# defaults, bound when the module runs (before any program does), so replacing a
# builtin or writing to the module's globals changes nothing of what it writes
# (the guard's hardening rule, checked by its tests).


class _JSONPunct:
    """Punctuation on to_json's stack, written as it is."""
    __slots__ = ('s',)

    def __init__(self, s):
        self.s = s


_JSON_TABLE = {i: '\\u%04x' % i for i in range(32)}
_JSON_TABLE[ord('"')] = '\\"'
_JSON_TABLE[ord('\\')] = '\\\\'
_JSON_TABLE = type(type.__dict__)(_JSON_TABLE)  # read-only: a mappingproxy


def to_json(o, _type=type, _str=str, _bool=bool, _int=int, _float=float, _list=list, _tuple=tuple, _dict=dict,
            _repr=repr, _reversed=reversed, _enumerate=enumerate, _ord=ord, _join=''.join,
            _UnicodeEncodeError=UnicodeEncodeError, _Punct=_JSONPunct, _table=_JSON_TABLE,
            _nonfinite=(float('inf'), float('-inf'))):
    """JSON text of plain data (str, int, float, bool, None, list, tuple, dict;
    anything else as the string of its repr), iterative; lone surrogates are
    escaped (\\udxxx), so the text always encodes to UTF-8."""
    out = []
    stack = [o]
    while stack:
        o = stack.pop()
        t = _type(o)
        if t is _Punct:
            out.append(o.s)
        elif t is _str:
            s = o.translate(_table)
            if not s.isascii():
                try:
                    s.encode('utf-8')
                except _UnicodeEncodeError:
                    s = _join(['\\u%04x' % _ord(c) if '\ud800' <= c <= '\udfff' else c for c in s])
            out.append('"' + s + '"')
        elif o is None:
            out.append('null')
        elif t is _bool:
            out.append('true' if o else 'false')
        elif t is _int:
            out.append(_repr(o))
        elif t is _float:
            out.append(_repr(o) if o == o and o not in _nonfinite else 'null')
        elif t is _list or t is _tuple:
            out.append('[')
            stack.append(_Punct(']'))
            items = []
            for i, x in _enumerate(o):
                if i:
                    items.append(_Punct(','))
                items.append(x)
            stack.extend(_reversed(items))
        elif t is _dict:
            out.append('{')
            stack.append(_Punct('}'))
            items = []
            for i, (k, v) in _enumerate(o.items()):
                if i:
                    items.append(_Punct(','))
                items.append(_str(k))
                items.append(_Punct(':'))
                items.append(v)
            stack.extend(_reversed(items))
        else:
            out.append('"' + _repr(o).translate(_table) + '"')
    return _join(out)


_json = to_json
