"""aneforge for Python: build graphs, differentiate, compile and run them on the CPU, the
simulated Neural Engine (ane-sim) or the Neural Engine, and train, over NumPy arrays.

    import aneforge as af
    g = af.Graph()
    x = g.input("x", (4, 3))
    w = g.parameter("w", np.ones((3, 2), np.float32))
    y = (x @ w).relu()
    model = af.compile(y, [x, w], target="ane-sim:m1")
    print(model(x=np.ones((4, 3), np.float32)))

A thin layer over libaneforge (ctypes; ARCHITECTURE.md says why). Every op of the
library's op table is a function here (af.ops() lists them) and a Tensor method; errors
raise aneforge.Error subclasses carrying the library's message.
"""
import ctypes as _ctypes

from . import _lib
from ._lib import C as _C, lib as _clib
from .errors import (ClosedError, CompileError, CorruptError, Error, GraphError, InvalidError, IOError, NoMemoryError,
                     NumericError, ShapeError, UnsupportedError)
from .graph import INTERNAL_OPS, OPS, Graph, Tensor, default_graph, dtype_code, op_info, op_table
from .model import (CEHandle, Loss, Model, Stats, backward, backward_from, compile, cross_entropy, loss_scalar,
                    mse, op_has_vjp, parse_target, softmax_cross_entropy)

__version__ = _ctypes.string_at(_clib.af_version()).decode()
version = __version__

globals().update({k: v for k, v in OPS.items() if v is not None})
div = OPS["real_div"]
sum = OPS["reduce_sum"]  # noqa: A001
mean = OPS["reduce_mean"]


def ops():
    """Names of the op functions generated from the op table and the header."""
    return sorted(k for k, v in OPS.items() if v is not None)


def input(name, shape, dtype="fp32", graph=None):  # noqa: A001
    """A fed input of the default graph (or `graph`)."""
    return (graph or default_graph()).input(name, shape, dtype)


def parameter(value=None, name=None, shape=None, graph=None):
    """A trainable leaf holding an fp32 master value: af.parameter(array) or
    af.parameter(name=..., shape=...), in the default graph (or `graph`)."""
    if isinstance(value, str) and name is None:
        value, name = None, value
    return (graph or default_graph()).parameter(name, value, shape)


def conv_param(weight_init=None, name=None, shape=None, graph=None):
    """A trainable conv weight from PyTorch layout [Cout, Cin, kH, kW] for af.conv2d."""
    if isinstance(weight_init, str) and name is None:
        weight_init, name = None, weight_init
    return (graph or default_graph()).conv_param(name, weight_init, shape)


def const(value, name=None, graph=None):
    """A baked constant of the default graph (or `graph`)."""
    return (graph or default_graph()).const(value, name)


def set_log(fn):
    """Routes the library's warnings and notes to fn(level, message) ('info'/'warn');
    None silences them. Process-wide."""
    global _log_cb
    if fn is None:
        _clib.af_set_log(None, None)
        _log_cb = None
        return
    proto = _ctypes.CFUNCTYPE(None, _ctypes.c_int, _ctypes.c_char_p, _ctypes.c_void_p)

    def cb(level, msg, user):
        try:
            fn("warn" if level == _C["AF_LOG_WARN"] else "info", msg.decode("utf-8", "replace"))
        except Exception:  # a callback's error must not unwind through C
            pass

    _log_cb = proto(cb)
    _clib.af_set_log(_ctypes.cast(_log_cb, _ctypes.c_void_p), None)


_log_cb = None


def f32_to_f16(x):
    """fp16 bits of fp32 values, round to nearest even (af_f32_to_f16)."""
    import numpy as np
    return np.asarray(x, np.float32).astype(np.float16)


from .train import Trainer, UnrolledTrainer, TrainOptions, StepInfo, Dist, adam_step, adam_lr_t, nets  # noqa: E402
from .sim import SimEngine, estimate_us, precision_flags  # noqa: E402
from . import coreml, data, hf, llama, mil, text  # noqa: E402
from .text import Tokenizer, read_tokens, write_tokens  # noqa: E402
from .data import Dataset, npy_read, npy_write  # noqa: E402
