"""Compile and run (af_compile, af_run), autograd (af_backward) and losses."""
import ctypes

import numpy as np

from . import _cdefs
from ._lib import C, Handle, check, encode, last_error, lib, parse_target, shape_tuple
from .errors import CompileError, GraphError, InvalidError
from .graph import Tensor, dtype_code

_F32, _F16 = C["AF_F32"], C["AF_F16"]


def compile_opts(target="cpu", precision=None, threads=0, via_mil=False, precision_check=True,
                 sim_engine=None, ane_framework=None):
    o = _cdefs.af_compile_opts()
    o.target, fam = parse_target(target)
    o.family = fam
    o.precision = {None: 0, "default": 0, "fp32": 1, "float32": 1, "fp16": 2, "float16": 2}.get(precision, -1)
    if o.precision < 0:
        raise InvalidError("precision %r: use 'fp32', 'fp16' or None (the target's default)" % (precision,))
    o.threads = int(threads)
    o.via_mil = 1 if via_mil else 0
    o.precision_check = 0 if precision_check else -1  # AF_DEFAULT (on) or AF_OFF
    o.sim_engine = sim_engine.ptr if sim_engine is not None else None
    keep = encode(ane_framework, "ane_framework") if ane_framework else None
    o.ane_framework = keep
    return o, keep


def _reachable(outputs):
    """Input and parameter leaves the outputs depend on, in creation order (recipes)."""
    seen, leaves, stack = set(), [], list(outputs)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.recipe and t.recipe[0] in ("input", "parameter", "conv_param"):
            leaves.append(t)
        stack.extend(t.srcs)
    return sorted(leaves, key=lambda t: t._seq)


def as_buffer(arr, count, what):
    """A float32 or float16 C-contiguous array of `count` elements (no copy when the
    given buffer already is one) and its af dtype."""
    if isinstance(arr, Tensor):
        raise InvalidError("%s: feed arrays, not graph Tensors" % what)
    a = np.asarray(arr)
    if a.dtype == np.float16:
        a = np.ascontiguousarray(a)
        dt = _F16
    else:
        if a.dtype.kind not in "fiub":
            raise InvalidError("%s: dtype %s is not numeric (give float32, float16 or int data)" % (what, a.dtype))
        a = np.ascontiguousarray(a, dtype=np.float32)
        dt = _F32
    if a.size != count:
        raise InvalidError("%s: %d elements given, the compiled shape holds %d" % (what, a.size, count))
    return a, dt


class Stats:
    """What running a model cost (af_stats)."""
    __slots__ = [f for f, _ in _cdefs.af_stats._fields_]

    def __init__(self, s):
        for f in self.__slots__:
            setattr(self, f, int(getattr(s, f)))

    def __repr__(self):
        return "Stats(%s)" % ", ".join("%s=%d" % (f, getattr(self, f)) for f in self.__slots__)

    def as_dict(self):
        """The counters as a dict (compiles, dispatches, bytes_in, ...)."""
        return {f: getattr(self, f) for f in self.__slots__}


class Model(Handle):
    """A compiled model (af_model). Call it with arrays for its inputs, positionally or by
    input name; parameters not given are fed their current master value. Returns NumPy
    arrays (one, a tuple, or a dict when compiled from a dict of outputs). Thread-safe as
    in C: calls on one model take turns, different models run in parallel."""
    _free = "af_model_free"
    _kind = "model"

    def __init__(self, ptr, graph, inputs, outputs, names):
        super().__init__(ptr)
        self.graph = graph  # the Python graph object: keeps parameter values readable
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._names = names
        self._in_shapes = [t.shape for t in inputs]
        self._in_ptrs = [t._p for t in inputs]
        self._in_param = [bool(lib.af_tensor_is_parameter(t._p)) for t in inputs]
        self._in_names = [t.name for t in inputs]
        self._out_shapes = [t.shape for t in outputs]
        self._in_type = _cdefs.af_buffer * max(1, len(inputs))
        self._out_type = _cdefs.af_buffer * max(1, len(outputs))
        self._bound = set()

    @property
    def input_names(self):
        """The inputs' names, in the order positional arguments feed them."""
        return list(self._in_names)

    def __call__(self, *args, out=None, **kwargs):
        """Runs the model on arrays (positionally or by input name; out= reuses arrays); model.run is the same."""
        ptr = self.ptr
        n = len(self._in_ptrs)
        if len(args) > n:
            raise InvalidError("model takes %d inputs (%s), %d given" % (n, ", ".join(self._in_names), len(args)))
        feeds = list(args) + [None] * (n - len(args))
        for k, v in kwargs.items():
            if k not in self._in_names:
                raise InvalidError("model has no input named %r (inputs: %s)" % (k, ", ".join(self._in_names)))
            i = self._in_names.index(k)
            if i < len(args):
                raise InvalidError("input %r given twice" % k)
            feeds[i] = v
        keep = []
        # buffers per call: the GIL is released inside af_run, so another thread may call
        # this model meanwhile (the header allows it) and must not touch these
        ins, outb = self._in_type(), self._out_type()
        for i in range(n):
            b = ins[i]
            cnt = int(np.prod(self._in_shapes[i], dtype=np.int64))
            v = feeds[i]
            if v is None and i in self._bound:
                b.data, b.dtype, b.count = None, _F32, cnt
                continue
            if v is None:
                if not self._in_param[i]:
                    raise InvalidError("input %r was not given" % self._in_names[i])
                b.data, b.dtype, b.count = lib.af_tensor_value(self._in_ptrs[i]), _F32, cnt
                continue
            a, dt = as_buffer(v, cnt, "input %r" % self._in_names[i])
            keep.append(a)
            b.data, b.dtype, b.count = a.ctypes.data, dt, cnt
        outs = []
        for j, shp in enumerate(self._out_shapes):
            o = out[j] if out is not None else np.empty(shp, np.float32)
            if not (isinstance(o, np.ndarray) and o.dtype == np.float32 and o.flags.c_contiguous and o.shape == tuple(shp)):
                raise InvalidError("out[%d] must be a C-contiguous float32 array of shape %s" % (j, list(shp)))
            b = outb[j]
            b.data, b.dtype, b.count = o.ctypes.data, _F32, o.size
            outs.append(o)
        check(lib.af_run(ptr, ins, outb))
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    run = __call__

    @property
    def stats(self):
        """Dispatches, programs (segments), compiles, bytes and FLOPs over the runs so far."""
        s = _cdefs.af_stats()
        lib.af_model_stats(self.ptr, ctypes.byref(s))
        return Stats(s)

    def reset_stats(self):
        """Zeroes the model's counters (stats)."""
        lib.af_model_stats_reset(self.ptr)

    @property
    def num_nodes(self):
        """The number of nodes the compiled model runs."""
        return lib.af_model_num_nodes(self.ptr)

    @property
    def arena_bytes(self):
        """The bytes of the model's activation arena."""
        return lib.af_model_arena_bytes(self.ptr)

    @property
    def family(self):
        """The engine family compiled for ("A13".."A16"), or None on the CPU."""
        f = lib.af_model_family(self.ptr)
        return ctypes.string_at(lib.af_family_name_of(f)).decode() if f else None

    def _index(self, inp):
        if isinstance(inp, str):
            if inp not in self._in_names:
                raise InvalidError("model has no input named %r" % inp)
            return self._in_names.index(inp)
        if isinstance(inp, Tensor):
            for i, t in enumerate(self.inputs):
                if t is inp:
                    return i
            raise InvalidError("%r is not an input of this model" % (inp,))
        return int(inp)

    def bind_state(self, inp, output, init=None):
        """Resident state: after every run output `output` (index) is copied onto input
        `inp` (index, name or Tensor), which then needs no feeding."""
        i = self._index(inp)
        if not 0 <= i < len(self._in_shapes):
            raise InvalidError("input index %d out of range" % i)
        cnt = int(np.prod(self._in_shapes[i], dtype=np.int64))
        a = None if init is None else as_buffer(np.asarray(init, np.float32), cnt, "init")[0]
        check(lib.af_model_bind_state(self.ptr, i, int(output), a.ctypes.data if a is not None else None))
        self._bound.add(i)

    def read_state(self, inp):
        """A copy of the current value of a state input (bind_state)."""
        i = self._index(inp)
        if not 0 <= i < len(self._in_shapes):
            raise InvalidError("input index %d out of range" % i)
        dst = np.empty(self._in_shapes[i], np.float32)
        check(lib.af_model_read_state(self.ptr, i, dst.ctypes.data))
        return dst

    def write_state(self, inp, value):
        """Overwrites the value of a state input (bind_state) with an array."""
        i = self._index(inp)
        if not 0 <= i < len(self._in_shapes):
            raise InvalidError("input index %d out of range" % i)
        cnt = int(np.prod(self._in_shapes[i], dtype=np.int64))
        a = as_buffer(np.asarray(value, np.float32), cnt, "state")[0]
        check(lib.af_model_write_state(self.ptr, i, a.ctypes.data))


def compile(outputs, inputs=None, target="cpu", precision=None, threads=0, via_mil=False,
            precision_check=True, sim_engine=None, ane_framework=None):
    """Compiles the part of the graph that computes `outputs` (a Tensor, a list, or a dict
    name -> Tensor) from `inputs` (a list of input/parameter Tensors; default: every input
    and parameter the outputs depend on, in creation order). target: "cpu", "ane-sim",
    "ane-sim:m1".."m5", "ane[:FAM]"; precision "fp32", "fp16" or None (the target's
    default). Returns a Model. The GIL is released while it compiles."""
    names = None
    if isinstance(outputs, dict):
        names = list(outputs.keys())
        outputs = list(outputs.values())
    elif isinstance(outputs, Tensor):
        outputs = [outputs]
    outputs = list(outputs)
    if not outputs or not all(isinstance(t, Tensor) for t in outputs):
        raise InvalidError("compile(): outputs are Tensors")
    g = outputs[0].graph
    if inputs is None:
        inputs = _reachable(outputs)
    elif isinstance(inputs, Tensor):
        inputs = [inputs]
    inputs = list(inputs)
    for t in inputs + outputs:
        if not isinstance(t, Tensor):
            raise InvalidError("compile(): inputs are Tensors, not %s" % type(t).__name__)
        if t.graph is not g:
            raise InvalidError("compile(): every input and output must come from one graph")
    o, keep = compile_opts(target, precision, threads, via_mil, precision_check, sim_engine, ane_framework)
    ins = (ctypes.c_void_p * max(1, len(inputs)))(*[t.ptr for t in inputs])
    outs = (ctypes.c_void_p * len(outputs))(*[t.ptr for t in outputs])
    m = lib.af_compile(g.ptr, len(inputs), ins, len(outputs), outs, ctypes.byref(o))
    if not m:
        raise CompileError("compile(): %s" % (last_error() or g.error))
    return Model(m, g, inputs, outputs, names)


# ------------------------------------------------------------------ losses and autograd

class Loss:
    """A loss (af_loss): a scalar, softmax cross-entropy (seed 000's CEHandle) or MSE.
    `.value` is the scalar loss tensor; `.root` the tensor backward starts from."""

    def __init__(self, graph, p, kind, srcs):
        self.graph, self._p, self.kind, self.srcs = graph, p, kind, srcs

    @property
    def ptr(self):
        """The af_loss pointer; ClosedError once its graph is closed."""
        self.graph.ptr  # raises once the graph is closed
        return self._p

    @property
    def value(self):
        """The scalar loss tensor."""
        t = lib.af_loss_value(self.ptr)
        if not t:
            raise GraphError(last_error() or self.graph.error)
        return Tensor(self.graph, t, ("_loss_value", self), self.srcs)

    @property
    def root(self):
        """The tensor backward starts from."""
        return Tensor(self.graph, lib.af_loss_root(self.ptr), ("_loss_root", self), self.srcs)

    @property
    def logits(self):
        """The logits (or prediction) the loss was built on."""
        return self.srcs[0]

    @property
    def target(self):
        """The target tensor (None for a scalar loss)."""
        return self.srcs[1] if len(self.srcs) > 1 else None


CEHandle = Loss


def _loss(cfn, kind, *ts):
    for t in ts:
        if not isinstance(t, Tensor):
            raise InvalidError("%s(): operands are Tensors, not %s" % (kind, type(t).__name__))
        if t.graph is not ts[0].graph:
            raise InvalidError("%s(): operands come from different graphs" % kind)
    p = cfn(*[t.ptr for t in ts])
    if not p:
        raise GraphError("%s(): %s" % (kind, last_error() or ts[0].graph.error))
    return Loss(ts[0].graph, p, kind, ts)


def softmax_cross_entropy(logits, onehot):
    """Mean softmax cross-entropy of logits [N, C] against one-hot targets [N, C]; its
    backward seed is the analytic (softmax(logits) - target) * loss_scale / N."""
    return _loss(lib.af_softmax_cross_entropy, "ce", logits, onehot)


cross_entropy = softmax_cross_entropy


def mse(pred, target):
    """Mean squared error over every element."""
    return _loss(lib.af_mse, "mse", pred, target)


def loss_scalar(t):
    """Any one-element tensor as a loss."""
    return _loss(lib.af_loss_scalar, "scalar", t)


def _as_loss(loss):
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, Tensor):
        return loss_scalar(loss)
    raise InvalidError("backward(): the loss is a Tensor of one element or a Loss, not %s" % type(loss).__name__)


def _bopts(loss_scale, stop, g):
    o = _cdefs.af_backward_opts()
    o.loss_scale = float(loss_scale or 0)
    keep = None
    if stop is not None:
        stop = list(stop)
        for t in stop:
            if not isinstance(t, Tensor) or t.graph is not g:
                raise InvalidError("backward(): stop lists Tensors of the loss's graph")
        keep = (ctypes.c_void_p * max(1, len(stop)))(*[t.ptr for t in stop])
        o.nstop, o.stop = len(stop), ctypes.cast(keep, ctypes.c_void_p)
    return o, keep


def backward(loss, params, loss_scale=None, stop=None):
    """Reverse-mode gradients: {param: gradient Tensor} for a scalar loss Tensor or a Loss.
    loss_scale multiplies dL/dloss; `stop` is the detach frontier (gradient reaches these
    tensors but does not flow past them; default: the params)."""
    single = isinstance(params, Tensor)
    params = [params] if single else list(params)
    L = _as_loss(loss)
    for p in params:
        if not isinstance(p, Tensor) or p.graph is not L.graph:
            raise InvalidError("backward(): params are Tensors of the loss's graph")
    o, keep = _bopts(loss_scale, stop, L.graph)
    ps = (ctypes.c_void_p * max(1, len(params)))(*[p.ptr for p in params])
    gs = (ctypes.c_void_p * max(1, len(params)))()
    st = lib.af_backward(L.ptr, len(params), ps, gs, ctypes.byref(o))
    if st:
        raise GraphError("backward(): %s" % (last_error() or L.graph.error))
    return {p: Tensor(L.graph, gs[i], ("_grad", i), (L.root,)) for i, p in enumerate(params)}


def backward_from(seed, root, params, loss_scale=None, stop=None):
    """Gradients from an explicit seed (the gradient arriving at root, root's shape)."""
    params = list(params)
    g = root.graph
    o, keep = _bopts(loss_scale, stop, g)
    ps = (ctypes.c_void_p * max(1, len(params)))(*[p.ptr for p in params])
    gs = (ctypes.c_void_p * max(1, len(params)))()
    st = lib.af_backward_from(seed.ptr, root.ptr, len(params), ps, gs, ctypes.byref(o))
    if st:
        raise GraphError("backward_from(): %s" % (last_error() or g.error))
    return {p: Tensor(g, gs[i], ("_grad", i), (root, seed)) for i, p in enumerate(params)}


def op_has_vjp(name):
    """True when the op (by name) has a VJP rule or needs none."""
    from .graph import op_table
    return bool(lib.af_op_has_vjp(op_table().index(name)))
