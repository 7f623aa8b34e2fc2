"""pysandboxes: what a program running in a sandbox can see of it.

The exceptions the sandbox's Python layer raises (every refusal is also an
ordinary exception: FileNotFoundError, PermissionError, ConnectionRefusedError,
ModuleNotFoundError), sandbox_denials(exc) and is_in_sandbox(). This module only
exists inside a sandboxed interpreter; it holds no switch of the layer.
"""


class SandBoxError(RuntimeError):
    """Base class of every error of the sandbox."""


class ConfigSyntaxError(SandBoxError):
    """A rule file is invalid (reported by the host)."""


class SandBoxProtocolError(SandBoxError):
    """The host and the sandbox could not talk."""


class SandBoxBaseExceptionError(SandBoxError):
    """A BaseException ended a sandboxed call."""


class RuleAttributeError(SandBoxError, AttributeError):
    """Reserved (never raised)."""


class RuleFileNotFoundError(FileNotFoundError, SandBoxError):
    """A path that no rule exposes, or that an ignore= rule hides."""


class RulePermissionError(PermissionError, SandBoxError):
    """A write under a read-only rule."""


class RuleSocketConnectionRefusedError(ConnectionRefusedError, SandBoxError):
    """A connection, bind or send that the net= rules refuse."""


class RuleModuleNotFoundError(ModuleNotFoundError, SandBoxError):
    """An import that no python-import= rule allows."""


class RuleApiPermissionError(PermissionError, SandBoxError):
    """A sensitive function that python-api= does not allow (qualname, category)."""

    def __init__(self, *args, qualname="", category=""):
        super().__init__(*args)
        self.qualname = qualname
        self.category = category


class RuleEvalPermissionError(PermissionError, SandBoxError):
    """Code given as a string that the eval rules refuse."""


def _message(e):
    if isinstance(e, OSError) and e.strerror is not None:
        return e.strerror
    return str(e)


def sandbox_denials(exc):
    """Return "<ExcName>: <message>" for every sandbox refusal found in exc and
    in its chain (__cause__, __context__, ExceptionGroup members), innermost first.
    An empty list means that exc is not a sandbox refusal."""
    out = []
    seen = set()

    def walk(e):
        if e is None or id(e) in seen:
            return
        seen.add(id(e))
        for sub in getattr(e, "exceptions", None) or ():
            walk(sub)
        walk(e.__cause__)
        walk(e.__context__)
        if isinstance(e, SandBoxError):
            out.append(type(e).__name__ + ": " + _message(e))

    walk(exc)
    return out


def is_in_sandbox():
    """True: this module only exists inside a sandbox."""
    return True
