"""Loads libaneforge and gives its functions their prototypes (from _cdefs, generated
from the header). ctypes releases the GIL around every foreign call, so compile, run and
training steps let other Python threads run."""
import ctypes
import glob
import os
import sys

from . import _cdefs
from .errors import ClosedError, Error, raise_status

C = _cdefs.CONSTANTS


def _find_library():
    # ANEFORGE_LIBRARY names a build tree's library (make test runs the suite that way);
    # otherwise the copy the wheel carries beside this file.
    env = os.environ.get("ANEFORGE_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    names = {"darwin": "libaneforge*.dylib", "win32": "aneforge*.dll"}.get(sys.platform, "libaneforge.so*")
    found = sorted(glob.glob(os.path.join(here, names)), key=len)
    if not found:
        raise ImportError("aneforge: libaneforge was not found beside %s; install the package with "
                          "`pip install .` from the repository, or set ANEFORGE_LIBRARY to a built "
                          "libaneforge.so" % here)
    return found[0]


lib = ctypes.CDLL(_find_library())
missing = []
for _name, (_ret, _args, _raw, _doc, _cret) in _cdefs.FUNCTIONS.items():
    try:
        fn = getattr(lib, _name)
    except AttributeError:
        missing.append(_name)  # a header newer than the library: that call raises if used
        continue
    fn.restype = _ret
    fn.argtypes = _args


def fn(name):
    try:
        return getattr(lib, name)
    except AttributeError:
        raise Error("%s is not in the loaded libaneforge (%s); rebuild it" % (name, lib._name)) from None


def last_error():
    p = lib.af_error_message()
    return ctypes.string_at(p).decode("utf-8", "replace") if p else ""


def check(status, what=None):
    """Raises the Error subclass for a non-zero af_status with the library's message."""
    if status:
        raise_status(status, last_error() or what or "failed")
    return status


def cstr(p, n=None):
    if not p:
        return None
    return (ctypes.string_at(p, n) if n is not None else ctypes.string_at(p)).decode("utf-8", "replace")


def encode(s, what="a string"):
    if isinstance(s, os.PathLike):
        s = os.fspath(s)
    if isinstance(s, bytes):
        return s
    if not isinstance(s, str):
        raise TypeError("%s must be str, not %s" % (what, type(s).__name__))
    return s.encode("utf-8")


def shape_struct(dims):
    dims = tuple(int(d) for d in dims)
    s = _cdefs.af_shape()
    if len(dims) > C["AF_MAX_RANK"]:
        s.rank = -1
        return s
    s.rank = len(dims)
    for i, d in enumerate(dims):
        s.dim[i] = d
    return s


def shape_tuple(s):
    return tuple(int(s.dim[i]) for i in range(max(0, s.rank)))


class Handle:
    """A C object owned by one Python object: freed once, by close() or collection;
    every use after close raises ClosedError instead of touching freed memory."""
    _free = None
    _kind = "object"
    _null_error = None  # an Error class: a NULL pointer from the constructor call raises it

    def __init__(self, ptr):
        if not ptr and self._null_error:
            raise self._null_error(last_error())
        self._ptr = ptr

    @property
    def ptr(self):
        p = self._ptr
        if not p:
            raise ClosedError("this %s was closed; make a new one" % self._kind)
        return p

    @property
    def closed(self):
        return not self._ptr

    def close(self):
        p, self._ptr = self._ptr, None
        if p and self._free:
            getattr(lib, self._free)(p)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def parse_target(spec):
    """'cpu', 'ane-sim', 'ane-sim:m1', 'ane[:FAM]' -> (af_target, af_family_id)."""
    t, f = ctypes.c_int(), ctypes.c_int()
    check(lib.af_target_parse(encode(spec, "target"), ctypes.byref(t), ctypes.byref(f)))
    return t.value, f.value
