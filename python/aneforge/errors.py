"""Exceptions: one class per af_status, all subclasses of aneforge.Error, each carrying
the library's message (af_error_message or the graph's first error)."""


class Error(Exception):
    """Base class of every error aneforge raises for a failed library call."""
    status = None


class InvalidError(Error, ValueError):
    """A bad argument (AF_ERR_INVALID): NULL, out-of-range axis, wrong dtype."""
    status = 1


class ShapeError(Error, ValueError):
    """Shapes that do not fit together (AF_ERR_SHAPE)."""
    status = 2


class UnsupportedError(Error):
    """Valid, but not supported by this target or op (AF_ERR_UNSUPPORTED)."""
    status = 3


class NoMemoryError(Error, MemoryError):
    """The library ran out of memory (AF_ERR_NOMEM)."""
    status = 4


class IOError(Error, OSError):  # noqa: A001 (aneforge.IOError, a subclass of the builtin)
    """A file could not be opened, read or written (AF_ERR_IO)."""
    status = 5


class CorruptError(Error):
    """A file failed its format or checksum checks (AF_ERR_CORRUPT)."""
    status = 6


class NumericError(Error, ArithmeticError):
    """inf or nan where finite values are required (AF_ERR_NUMERIC)."""
    status = 7


class GraphError(Error, ValueError):
    """An op builder refused its operands; the message is the graph's first error. The
    graph keeps that error (as in C): later compiles from it fail with it too."""


class CompileError(Error):
    """af_compile refused the graph: a target's wall or limit, an unsupported op, a
    missing input; the message names the rule and the remedy."""


class ClosedError(Error):
    """A Graph, Model, Trainer or other object was used after close()."""


BY_STATUS = {c.status: c for c in (InvalidError, ShapeError, UnsupportedError, NoMemoryError, IOError,
                                   CorruptError, NumericError)}


def raise_status(status, message):
    raise BY_STATUS.get(int(status), Error)(message)
