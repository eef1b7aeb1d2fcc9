"""MIL (Apple's Model Intermediate Language): emit a graph as model.mil + weights, read a
MIL program back into a graph, and run it (compile the loaded graph)."""
import ctypes
import os

from ._lib import check, encode, last_error, lib
from .errors import InvalidError
from .graph import Graph, Tensor
from .model import compile


def emit(outputs, inputs, dir):
    """Writes the part of the graph computing `outputs` from `inputs` as <dir>/model.mil
    and <dir>/weights/weight.bin (af_mil_emit)."""
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    g = outputs[0].graph
    ins = (ctypes.c_void_p * max(1, len(inputs)))(*[t.ptr for t in inputs])
    outs = (ctypes.c_void_p * len(outputs))(*[t.ptr for t in outputs])
    check(lib.af_mil_emit(g.ptr, len(inputs), ins, len(outputs), outs, encode(dir, "dir")))
    return os.path.join(os.fspath(dir), "model.mil")


class Program:
    """A MIL program read into a new graph: .graph, .inputs (function arguments, in
    order), .outputs (returned values). compile()/run a model from it."""

    def __init__(self, graph, inputs, outputs):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs

    def compile(self, **kw):
        """af.compile(self.outputs, self.inputs, **kw)."""
        return compile(self.outputs, self.inputs, **kw)


def read(mil_path, weights_dir=None):
    """Reads model.mil (program(1)..(1.5)) and the weight files it cites (af_mil_load)."""
    gp = ctypes.c_void_p()
    nin, nout = ctypes.c_int(), ctypes.c_int()
    pin, pout = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.af_mil_load(encode(mil_path, "mil_path"), encode(weights_dir, "weights_dir") if weights_dir else None,
                          ctypes.byref(gp), ctypes.byref(nin), ctypes.byref(pin), ctypes.byref(nout), ctypes.byref(pout)))
    g = Graph.__new__(Graph)
    g._ptr, g._names = gp.value, 0
    ins = ctypes.cast(pin, ctypes.POINTER(ctypes.c_void_p))
    outs = ctypes.cast(pout, ctypes.POINTER(ctypes.c_void_p))
    inputs = [Tensor(g, ins[i], ("mil_input", i), ()) for i in range(nin.value)]
    outputs = [Tensor(g, outs[i], ("mil_output", i), tuple(inputs)) for i in range(nout.value)]
    return Program(g, inputs, outputs)


def run(mil_path, *args, weights_dir=None, target="cpu", **kw):
    """Reads, compiles and runs a MIL program once on arrays (by position or argument name)."""
    p = read(mil_path, weights_dir)
    m = p.compile(target=target)
    return m(*args, **kw)
