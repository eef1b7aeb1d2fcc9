"""Core ML packages (.mlpackage; include/aneforge_coreml.h, docs/coreml.md): export a
graph or a built-in net as an mlProgram, read a package back as a MIL program, turn its
weights into parameters to fine-tune it, and freeze them back to export again.

    af.coreml.export(y, [x], "m.mlpackage", author="me")
    p = af.coreml.load("m.mlpackage")          # .graph, .inputs, .outputs
    print(p.compile()(x=batch))
"""
import ctypes
import os

import numpy as np

from . import _cdefs
from ._lib import ClosedError, Handle, check, encode, last_error, lib
from .errors import InvalidError
from .graph import Graph, Tensor
from .mil import Program
from .model import compile


_TARGETS = (15, 16, 17, 18)  # deployment targets iOS 15..18 / macOS 12..15 (specification versions 6..9)


def _opts(author, license, version, description, ios, precision):
    ios = 18 if ios is None else ios
    if isinstance(ios, bool) or ios not in _TARGETS:
        raise InvalidError("coreml: ios=%r: the deployment target is 15, 16, 17 or 18 (iOS 15..18 / macOS 12..15)" % (ios,))
    bits = {16: 16, 32: 32, "fp16": 16, "fp32": 32}.get(precision) if not isinstance(precision, bool) else None
    if bits is None:
        raise InvalidError("coreml: precision=%r: choose \"fp16\" or \"fp32\"" % (precision,))
    o = _cdefs.af_coreml_opts()
    keep = []
    for k, v in (("author", author), ("license", license), ("version", version), ("description", description)):
        if v is not None:
            keep.append(ctypes.create_string_buffer(encode(v, k)))  # alive until the call returns
            setattr(o, k, ctypes.addressof(keep[-1]))
    o.ios = int(ios)
    o.precision = bits
    return o, keep


def _tensors(ts, what):
    ts = [ts] if isinstance(ts, Tensor) else list(ts)
    if not all(isinstance(t, Tensor) for t in ts):
        raise InvalidError("coreml: %s are Tensors" % what)
    return ts


def export(outputs, inputs, path, author=None, license=None, version=None, description=None, ios=18,
           precision="fp16"):
    """Writes the part of the graph computing `outputs` from `inputs` as the Core ML
    package `path` (af_coreml_export): an mlProgram for the deployment target iOS `ios`
    (15..18, i.e. macOS 12..15; default 18), fp16 inputs, outputs and weights (iOS 15:
    fp32 inputs and outputs cast to fp16 inside), or fp32 throughout with precision="fp32".
    `path` must not exist yet; a failure leaves nothing behind. Returns path."""
    outputs, inputs = _tensors(outputs, "outputs"), _tensors(inputs, "inputs")
    if not outputs:
        raise InvalidError("coreml.export(): at least one output")
    g = outputs[0].graph
    for t in outputs + inputs:
        if t.graph is not g:
            raise InvalidError("coreml.export(): inputs and outputs come from different graphs")
    o, keep = _opts(author, license, version, description, ios, precision)
    ins = (ctypes.c_void_p * max(1, len(inputs)))(*[t.ptr for t in inputs])
    outs = (ctypes.c_void_p * len(outputs))(*[t.ptr for t in outputs])
    check(lib.af_coreml_export(g.ptr, len(inputs), ins, len(outputs), outs, ctypes.byref(o), encode(path, "path")))
    return os.fspath(path)


def export_net(net, path, batch, weights=None, author=None, license=None, version=None, description=None, ios=18,
               precision="fp16"):
    """Exports a built-in net (af.nets.mlp/cnn, a llama) for a fixed batch: input
    "input" [batch, sample...] to "output" [batch, out_dim] (af_coreml_export_net), for
    iOS `ios` in `precision` as export() does. weights: arrays in the net's parameter
    order (a Trainer's params()); None: the net's initial values."""
    c = net.c_net() if hasattr(net, "c_net") else None
    if c is None:
        raise ClosedError("coreml.export_net(): %r is no open net (a Trainer takes the net it is given); "
                          "make the net again, e.g. af.nets.mlp(...)" % (net,))
    o, keep = _opts(author, license, version, description, ios, precision)
    arrs, wp = None, None
    if weights is not None:
        arrs = [np.ascontiguousarray(w, np.float32) for w in weights]
        wp = (ctypes.c_void_p * max(1, len(arrs)))(*[a.ctypes.data for a in arrs])
    check(lib.af_coreml_export_net(ctypes.byref(c), int(batch), wp, ctypes.byref(o), encode(path, "path")))
    return os.fspath(path)


def load(path):
    """Reads the mlProgram of a package (or a bare model.mlmodel) into a new graph
    (af_coreml_load): a mil.Program with .graph, .inputs, .outputs, .compile()."""
    gp = ctypes.c_void_p()
    nin, nout = ctypes.c_int(), ctypes.c_int()
    pin, pout = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib.af_coreml_load(encode(path, "path"), ctypes.byref(gp), ctypes.byref(nin), ctypes.byref(pin),
                             ctypes.byref(nout), ctypes.byref(pout)))
    g = Graph.__new__(Graph)
    g._ptr, g._names = gp.value, 0
    ins = ctypes.cast(pin, ctypes.POINTER(ctypes.c_void_p))
    outs = ctypes.cast(pout, ctypes.POINTER(ctypes.c_void_p))
    inputs = [Tensor(g, ins[i], ("coreml_input", i), ()) for i in range(nin.value)]
    outputs = [Tensor(g, outs[i], ("coreml_output", i), tuple(inputs)) for i in range(nout.value)]
    return Program(g, inputs, outputs)


class _ProgramGraph(Graph):
    """The graph an OpenProgram owns: closed with it, never freed on its own."""
    _free = None

    def __init__(self, ptr, owner):
        Handle.__init__(self, ptr)
        self._names, self._owner = 0, owner

    def close(self):
        self._owner.close()


class OpenProgram(Handle):
    """A Core ML package read as a MIL program (af_coreml_open): .graph, .inputs and
    .outputs (Tensors), .input_names / .output_names and their MIL dtypes. Closing it
    closes its graph; models compiled from it keep working."""
    _free = "af_mil_close"
    _kind = "Core ML program"

    def __init__(self, ptr):
        super().__init__(ptr)
        self.graph = _ProgramGraph(lib.af_mil_graph(ptr), self)
        self.inputs, self.input_names, self.input_dtypes = self._side(lib.af_mil_num_args(ptr), lib.af_mil_arg, ())
        self.outputs, self.output_names, self.output_dtypes = self._side(lib.af_mil_num_results(ptr), lib.af_mil_result,
                                                                         tuple(self.inputs))

    def _side(self, n, get, srcs):
        ts, names, dts = [], [], []
        for i in range(n):
            nm, dt = ctypes.c_char_p(), ctypes.c_char_p()
            p = get(self._ptr, i, ctypes.byref(nm), ctypes.byref(dt))
            ts.append(Tensor(self.graph, p, ("coreml_value", i), srcs))
            names.append(nm.value.decode() if nm.value else None)
            dts.append(dt.value.decode() if dt.value else None)
        return ts, names, dts

    def close(self):
        """Frees the program (af_mil_close) and closes its graph; models compiled from it keep working."""
        super().close()
        self.graph._ptr = None

    def compile(self, **kw):
        """af.compile(self.outputs, self.inputs, **kw)."""
        if self.closed:
            raise ClosedError("this Core ML program was closed; open it again")
        return compile(self.outputs, self.inputs, **kw)


def open(path, function=None):  # noqa: A001
    """Reads a package as a MIL program (af_coreml_open); function None: "main" or the
    only one. Returns an OpenProgram (use it in a `with` block or close() it)."""
    out = ctypes.c_void_p()
    check(lib.af_coreml_open(encode(path, "path"), encode(function, "function") if function is not None else None,
                             ctypes.byref(out)))
    return OpenProgram(out.value)


def _graph_of(g):
    return g.graph if isinstance(g, (Program, OpenProgram)) else g


def params(graph, pattern=None):
    """Turns the float weight constants of an imported graph (or program) whose names match
    the glob `pattern` (None: all) into parameters with fp32 masters (af_coreml_params) and
    returns them as Tensors, to train with af.backward / a Trainer."""
    g = _graph_of(graph)
    if not isinstance(g, Graph):
        raise InvalidError("coreml.params(): a Graph or a program from coreml.load/open, not %s" % type(graph).__name__)
    pat = encode(pattern, "pattern") if pattern else None
    arr = (ctypes.c_void_p * max(1, lib.af_graph_size(g.ptr)))()  # no more params than nodes
    n = lib.af_coreml_params(g.ptr, pat, arr, len(arr))
    if n < 0:
        raise InvalidError(last_error())
    out = []
    for i in range(n):
        t = Tensor(g, arr[i], None, ())
        t.recipe = ("parameter", t.name, t.shape)
        out.append(t)
    return out


def freeze(params, values=None):
    """Freezes parameters from coreml.params back into constants (af_coreml_freeze),
    holding `values` (arrays, e.g. a Trainer's params(); None: the values they hold), so
    the graph exports again."""
    params = _tensors(params, "params")
    arrs, vp = None, None
    if values is not None:
        values = list(values)
        if len(values) != len(params):
            raise InvalidError("coreml.freeze(): %d values for %d params" % (len(values), len(params)))
        arrs = []
        for t, v in zip(params, values):
            a = np.ascontiguousarray(v, np.float32)
            if a.size != int(np.prod(t.shape, dtype=np.int64)):
                raise InvalidError("coreml.freeze(): a value of shape %s for %s of shape %s"
                                   % (list(a.shape), t.name, list(t.shape)))
            arrs.append(a)
        vp = (ctypes.c_void_p * len(arrs))(*[a.ctypes.data for a in arrs])
    ps = (ctypes.c_void_p * max(1, len(params)))(*[t.ptr for t in params])
    check(lib.af_coreml_freeze(len(params), ps, vp))
    for t in params:
        t.recipe = ("const", t.name, None)


def fp16_inputs(program):
    """Declares a program's fp32 inputs fp16 (af_coreml_fp16_inputs) so it compiles for
    ane-sim / ane: exact for a model converted in fp16 precision."""
    ins = (ctypes.c_void_p * max(1, len(program.inputs)))(*[t.ptr for t in program.inputs])
    check(lib.af_coreml_fp16_inputs(program.graph.ptr, len(program.inputs), ins))


__all__ = ["export", "export_net", "load", "open", "params", "freeze", "fp16_inputs", "OpenProgram"]
