"""Graphs and tensors. The op functions are generated from the library's op table and the
header's prototypes (_cdefs): each op of af_op_name that has a public builder, plus the
header's other tensor builders (layers, transformer pieces), becomes a function here with
the C parameter names; its docstring is the header's comment."""
import ctypes
import inspect
import itertools
import threading

import numpy as np

from . import _cdefs
from ._lib import C, Handle, check, encode, fn, last_error, lib, parse_target, shape_struct, shape_tuple
from .errors import ClosedError, GraphError, InvalidError

_F32, _F16 = C["AF_F32"], C["AF_F16"]


def dtype_code(dt):
    """'fp32'/'float32'/np.float32 -> AF_F32, 'fp16'/'float16'/np.float16 -> AF_F16."""
    if dt is None:
        return _F32
    if isinstance(dt, int) and dt in (_F32, _F16):
        return dt
    try:
        name = np.dtype(dt).name
    except TypeError:
        name = str(dt).lower()
    name = {"fp32": "float32", "f32": "float32", "fp16": "float16", "f16": "float16", "half": "float16"}.get(name, name)
    if name == "float32":
        return _F32
    if name == "float16":
        return _F16
    raise InvalidError("dtype %r: aneforge tensors are float32 ('fp32') or float16 ('fp16')" % (dt,))


_local = threading.local()
_counter = itertools.count()


def default_graph():
    """The graph that module-level leaf builders (af.input, af.parameter, ...) use: the
    innermost `with af.Graph() as g:` of this thread, else one per thread made on demand."""
    stack = getattr(_local, "stack", None)
    if stack:
        return stack[-1]
    g = getattr(_local, "default", None)
    if g is None or g.closed:
        g = _local.default = Graph()
    return g


class Graph(Handle):
    """A graph (af_graph): tensors are built in it, models compiled from it. Freed when
    the object is collected or closed; models compiled from it keep what they need.
    `with af.Graph() as g:` makes it the default graph of af.input/af.parameter there."""
    _free = "af_graph_free"
    _kind = "graph"

    def __init__(self):
        p = lib.af_graph_new()
        if not p:
            check(C["AF_ERR_NOMEM"], "af_graph_new failed")
        super().__init__(p)
        self._names = 0

    def __enter__(self):
        _local.stack = getattr(_local, "stack", [])
        _local.stack.append(self)
        return self

    def __exit__(self, *exc):
        _local.stack.remove(self)

    @property
    def error(self):
        """The first error recorded in the graph, or None."""
        p = lib.af_graph_error(self.ptr)
        return ctypes.string_at(p).decode() if p else None

    def __len__(self):
        return lib.af_graph_size(self.ptr)

    def set_target(self, target):
        """Tells builders the target (af_graph_set_target) so composites pick its form."""
        lib.af_graph_set_target(self.ptr, parse_target(target)[0])

    def _name(self, name, prefix):
        if name is None:
            self._names += 1
            name = "%s%d" % (prefix, self._names)
        return name

    def input(self, name, shape, dtype="fp32"):
        """A fed input leaf of the given shape and dtype ('fp32' or 'fp16'; ane-sim
        programs take fp16)."""
        p = lib.af_input(self.ptr, encode(name, "name"), dtype_code(dtype), shape_struct(shape))
        return self._leaf(p, ("input", name, tuple(shape), dtype_code(dtype)))

    def parameter(self, name, value=None, shape=None):
        """A trainable input holding an fp32 master value (copied from `value`; zeros when
        only `shape` is given). `g.parameter(array)` names it p1, p2, ..."""
        if not isinstance(name, str) and value is None:
            name, value = None, name
        name = self._name(name, "p")
        if value is None:
            if shape is None:
                raise InvalidError("parameter %r needs a value or a shape" % name)
            arr = None
        else:
            arr = _f32(value)
            shape = arr.shape
        p = lib.af_parameter(self.ptr, encode(name, "name"), shape_struct(shape),
                             arr.ctypes.data if arr is not None else None)
        return self._leaf(p, ("parameter", name, tuple(shape)))

    def const(self, value, name=None):
        """A baked constant (the array is copied)."""
        arr = _f32(value)
        name = self._name(name, "c")
        p = lib.af_const(self.ptr, encode(name, "name"), shape_struct(arr.shape), arr.ctypes.data)
        return self._leaf(p, ("const", name, arr.copy()))

    def fill(self, shape, value):
        """A constant of one value (af_const_fill)."""
        p = lib.af_const_fill(self.ptr, shape_struct(shape), float(value))
        return self._leaf(p, ("fill", tuple(shape), float(value)))

    def conv_param(self, name, value=None, shape=None):
        """A trainable conv weight from PyTorch layout [Cout, Cin, kH, kW] (af_conv_param),
        stored as the patch matrix [Cin*kH*kW, Cout]; use it with af.conv2d."""
        if not isinstance(name, str) and value is None:
            name, value = None, name
        name = self._name(name, "w")
        arr = _f32(value) if value is not None else None
        dims = arr.shape if arr is not None else tuple(shape)
        if len(dims) != 4:
            raise InvalidError("conv_param %r: the weight is [Cout, Cin, kH, kW], not %s" % (name, list(dims)))
        p = lib.af_conv_param(self.ptr, encode(name, "name"), *[int(d) for d in dims],
                              arr.ctypes.data if arr is not None else None)
        t = self._leaf(p, ("conv_param", name, tuple(dims)))
        t._conv = tuple(dims)
        return t

    def _leaf(self, p, recipe):
        if not p:
            raise GraphError(last_error() or self.error or "builder failed")
        return Tensor(self, p, recipe, ())


def _f32(value):
    arr = np.ascontiguousarray(value, dtype=np.float32)
    return arr


class Tensor:
    """A tensor of a graph (af_tensor). It belongs to its graph; using it after the graph
    is closed raises ClosedError. Operators: + - * / @ ** neg abs, comparisons > <;
    indexing with ints and step-1 slices (slice_by_size); methods for every op."""
    __slots__ = ("graph", "_p", "recipe", "srcs", "_conv", "_seq", "__weakref__")
    __array_priority__ = 1000  # ndarray + Tensor calls Tensor.__radd__

    def __init__(self, graph, p, recipe, srcs):
        self.graph, self._p, self.recipe, self.srcs, self._conv = graph, p, recipe, srcs, None
        self._seq = next(_counter)

    @property
    def ptr(self):
        """The af_tensor pointer; ClosedError once its graph is closed."""
        if self.graph.closed:
            raise ClosedError("this tensor's graph was closed; tensors live as long as their graph")
        return self._p

    @property
    def shape(self):
        """The shape as a tuple of ints."""
        return shape_tuple(lib.af_tensor_shape(self.ptr))

    @property
    def ndim(self):
        """The rank."""
        return len(self.shape)

    @property
    def dtype(self):
        """numpy.float32 or numpy.float16."""
        return np.dtype(np.float16 if lib.af_tensor_dtype(self.ptr) == _F16 else np.float32)

    @property
    def name(self):
        """The leaf's or node's name (None when it has none)."""
        p = lib.af_tensor_name(self.ptr)
        return ctypes.string_at(p).decode() if p else None

    @property
    def op(self):
        """The op-table name of the node that makes it ("input", "add", ...)."""
        return ctypes.string_at(lib.af_tensor_op(self.ptr)).decode()

    @property
    def is_parameter(self):
        """True for a trainable parameter."""
        return bool(lib.af_tensor_is_parameter(self.ptr))

    @property
    def value(self):
        """A copy of the fp32 master value of a parameter or constant (None otherwise)."""
        p = lib.af_tensor_value(self.ptr)
        if not p:
            return None
        n = int(np.prod(self.shape, dtype=np.int64))
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), (n,)).reshape(self.shape).copy()

    @value.setter
    def value(self, arr):
        p = lib.af_tensor_value(self.ptr)
        if not p:
            raise InvalidError("%s is not a parameter or constant: it has no value to set" % self)
        n = int(np.prod(self.shape, dtype=np.int64))
        src = _f32(arr)
        if src.size != n:
            raise InvalidError("value of %d elements for %s of shape %s" % (src.size, self, list(self.shape)))
        ctypes.memmove(p, src.ctypes.data, 4 * n)

    def __repr__(self):
        try:
            return "Tensor(%s %s %s %s)" % (self.op, self.name or "", list(self.shape), self.dtype)
        except ClosedError:
            return "Tensor(<closed graph>)"

    def __len__(self):
        return self.shape[0]

    def __bool__(self):
        return True

    # operators
    def _coerce(self, other):
        if isinstance(other, Tensor):
            return other
        return self.graph.const(np.broadcast_to(np.asarray(other, np.float32), np.asarray(other).shape))

    def __add__(self, o):
        return OPS["adds"](self, float(o)) if _scalar(o) else OPS["add"](self, self._coerce(o))

    def __radd__(self, o):
        return OPS["adds"](self, float(o)) if _scalar(o) else OPS["add"](self._coerce(o), self)

    def __sub__(self, o):
        return OPS["adds"](self, -float(o)) if _scalar(o) else OPS["sub"](self, self._coerce(o))

    def __rsub__(self, o):
        return OPS["adds"](OPS["neg"](self), float(o)) if _scalar(o) else OPS["sub"](self._coerce(o), self)

    def __mul__(self, o):
        return OPS["muls"](self, float(o)) if _scalar(o) else OPS["mul"](self, self._coerce(o))

    def __rmul__(self, o):
        return OPS["muls"](self, float(o)) if _scalar(o) else OPS["mul"](self._coerce(o), self)

    def __truediv__(self, o):
        return OPS["muls"](self, 1.0 / float(o)) if _scalar(o) else OPS["real_div"](self, self._coerce(o))

    def __rtruediv__(self, o):
        return OPS["muls"](OPS["inverse"](self), float(o)) if _scalar(o) else OPS["real_div"](self._coerce(o), self)

    def __matmul__(self, o):
        return OPS["matmul"](self, self._coerce(o))

    def __rmatmul__(self, o):
        return OPS["matmul"](self._coerce(o), self)

    def __pow__(self, o):
        if _scalar(o) and float(o) == 2.0:
            return OPS["square"](self)
        return OPS["pow"](self, self._coerce(o) if not _scalar(o) else self.graph.fill((1,), float(o)))

    def __neg__(self):
        return OPS["neg"](self)

    def __abs__(self):
        return OPS["abs"](self)

    def __gt__(self, o):
        return OPS["greater"](self, self._coerce(o))

    def __lt__(self, o):
        return OPS["less"](self, self._coerce(o))

    def eq(self, o):
        """Elementwise equality as 1.0 / 0.0 (== stays identity, so tensors key dicts)."""
        return OPS["equal"](self, self._coerce(o))

    def __getitem__(self, idx):
        shape = self.shape
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(i is Ellipsis for i in idx):
            k = idx.index(Ellipsis)
            idx = idx[:k] + (slice(None),) * (len(shape) - len(idx) + 1) + idx[k + 1:]
        if len(idx) > len(shape):
            raise InvalidError("%d indices for a tensor of rank %d" % (len(idx), len(shape)))
        begin, size, keep = [], [], []
        for ax, d in enumerate(shape):
            i = idx[ax] if ax < len(idx) else slice(None)
            if isinstance(i, slice):
                b, e, st = i.indices(d)
                if st != 1:
                    raise InvalidError("slices with a step (%d) are not an op; use reshape/transpose" % st)
                begin.append(b)
                size.append(max(0, e - b))
                keep.append(max(0, e - b))
            elif isinstance(i, (int, np.integer)):
                j = int(i) + d if i < 0 else int(i)
                if not 0 <= j < d:
                    raise IndexError("index %d out of range for axis %d of extent %d" % (i, ax, d))
                begin.append(j)
                size.append(1)
            else:
                raise InvalidError("tensor indices are ints and step-1 slices, not %s" % type(i).__name__)
        out = OPS["slice_by_size"](self, begin, size)
        if len(keep) != len(shape):
            out = out.reshape(keep)
        return out

    def reshape(self, *shape):
        """View with a new shape (one dim may be -1)."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return OPS["reshape"](self, shape)

    def transpose(self, *perm):
        """Permute the axes (default: reverse them)."""
        if len(perm) == 1 and not isinstance(perm[0], (int, np.integer)):
            perm = tuple(perm[0])
        if not perm:
            perm = tuple(reversed(range(self.ndim)))
        return OPS["transpose"](self, perm)

    @property
    def T(self):
        """The transpose (axes reversed)."""
        return self.transpose()

    def softmax(self, axis=-1):
        """softmax along axis (af.softmax)."""
        return OPS["softmax"](self, axis)

    def sum(self, axis=None, keepdims=False):
        """Sum over axis (an int, a tuple; None: all), keeping them as 1 when keepdims."""
        return OPS["reduce_sum"](self, _axes(self, axis), keepdims)

    def mean(self, axis=None, keepdims=False):
        """Mean over axis (an int, a tuple; None: all), keeping them as 1 when keepdims."""
        return OPS["reduce_mean"](self, _axes(self, axis), keepdims)

    def max(self, axis=None, keepdims=False):
        """Max over axis (an int, a tuple; None: all), keeping them as 1 when keepdims."""
        return OPS["reduce_max"](self, _axes(self, axis), keepdims)

    def min(self, axis=None, keepdims=False):
        """Min over axis (an int, a tuple; None: all), keeping them as 1 when keepdims."""
        return OPS["reduce_min"](self, _axes(self, axis), keepdims)

    def astype(self, dtype):
        """Cast to 'fp32' or 'fp16' (af.cast)."""
        return OPS["cast"](self, dtype)


def _axes(t, axis):
    return tuple(range(t.ndim)) if axis is None else axis


def _scalar(o):
    return isinstance(o, (int, float, np.integer, np.floating)) and not isinstance(o, bool)


# ------------------------------------------------------------------ generated ops

# Public builders of op-table ops whose name differs from af_<op>.
ALIASES = {"real_div": "af_div", "slice_by_size": "af_slice"}
# Op-table ops with no builder of their own: leaves, and nodes only backward graphs make
# (made by af.backward on graphs targeted at the CPU).
INTERNAL = {
    "input": "a leaf: Graph.input / af.input",
    "const": "a leaf: Graph.const / af.const",
    "conv_weight_grad": "made by af.backward (CPU target)",
    "avg_pool_grad": "made by af.backward (CPU target)",
    "max_pool_grad": "made by af.backward (CPU target)",
    "causal_attention_grad": "made by af.backward (CPU target)",
    "swiglu": "made by af.llama on graphs targeted at the CPU",
    "swiglu_grad": "made by af.backward (CPU target)",
    "softmax_xent": "made by af.softmax_cross_entropy's loss value on graphs targeted at the CPU",
    "softmax_xent_grad": "made by the trainer's cross-entropy seed and af.backward (CPU target)",
    "rope": "built by af.rope on graphs targeted at the CPU",
    "causal_attention": "built by af.causal_attention on graphs targeted at the CPU",
}
# Header builders that are not ops of their own table row but build tensors.
_ENUMS = {"af_gelu_mode": "AF_GELU_", "af_sew_op": "AF_SEW_"}
_LEAVES = {"af_input", "af_const", "af_const_fill", "af_parameter", "af_conv_param", "af_trainer_param",
           "af_loss_value", "af_loss_root", "af_llama"}
_PAIRS = {"kernel", "stride", "pad", "dilation"}
# Builders with a hand-written wrapper below (their C parameters need more than the rules).
_HAND = {"af_split", "af_einsum"}
# Defaults for trailing C parameters, per op.
DEFAULTS = {"softmax": {"axis": -1}, "gelu": {"mode": 0}, "conv": {"groups": 1}, "matmul": {"transpose_a": 0, "transpose_b": 0},
            "reduce_sum": {"keep_dims": 0}, "reduce_mean": {"keep_dims": 0}, "reduce_max": {"keep_dims": 0},
            "reduce_min": {"keep_dims": 0}, "conv2d": {"stride": 1, "pad": 0}, "dropout": {"rate": 0.0},
            "rms_norm": {"eps": 1e-5}, "layer_norm": {"eps": 1e-5}, "channel_layer_norm": {"eps": 1e-5},
            "group_norm": {"eps": 1e-5}, "rope": {"offset": 0, "theta": 10000.0}, "causal_mask": {"offset": 0},
            "causal_attention": {"scale": 0.0}, "sdpa": {"mask": None, "scale": 0.0}, "mha": {"causal": 0},
            "sort": {"key_lane": 0, "descending": 0, "indices": 0}, "top_k": {"key_lane": 0, "largest": 1, "indices": 0},
            "arg_min_max": {"channel": 0, "max": 1}, "global_arg_min_max": {"axis": -1, "max": 1},
            "furthest_point_sampling": {"indices": 0}, "linear": {"b": None}}


def op_table():
    """The library's op names (af_op_name over af_op_count), in table order."""
    return [ctypes.string_at(lib.af_op_name(i)).decode() for i in range(lib.af_op_count())]


def op_info(name=None):
    """One op-table row (af_op_info) as a dict: name, kind, mil, arity, ports, leaf, bridge,
    cpu_only, attrs [{key, type, value, help}]; without a name, a list of every row."""
    if name is None:
        return [_op_row(i) for i in range(lib.af_op_count())]
    i = lib.af_op_find(encode(name, "op name"))
    if i < 0:
        raise InvalidError("no op %r in the op table; af.op_table() lists them" % (name,))
    return _op_row(i)


def _op_row(i):
    d = _cdefs.af_op_desc()
    check(lib.af_op_info(i, ctypes.byref(d)))
    s = lambda p: ctypes.string_at(p).decode() if p else ""  # noqa: E731
    attrs = [{"key": s(a.key), "type": s(a.type), "value": s(a.value), "help": s(a.help)} for a in d.attrs[:d.nattrs]]
    return {"name": s(d.name), "kind": s(d.kind), "mil": s(d.mil), "arity": d.arity, "ports": s(d.ports),
            "leaf": bool(d.leaf), "bridge": bool(d.bridge), "cpu_only": bool(d.cpu_only), "attrs": attrs}


class _Param:
    __slots__ = ("ctype", "name", "kind", "count_of")

    def __init__(self, ctype, name):
        self.ctype, self.name, self.kind, self.count_of = ctype, name, None, None


def _plan(cname):
    """How each C parameter of builder `cname` is filled from Python arguments."""
    raw = _cdefs.FUNCTIONS[cname][2]
    ps = [_Param(t, n) for t, n in raw]
    for i, p in enumerate(ps):
        t = p.ctype.replace("const ", "").strip()
        if t == "af_graph *":
            p.kind = "graph"
        elif t == "af_tensor *":
            p.kind = "tensor"
        elif t.replace(" ", "") == "af_tensor**" and "const" not in p.ctype:
            p.kind = "outlist"
        elif t.startswith("af_tensor *") and t.endswith("*"):
            p.kind = "tensors"
        elif t == "af_shape":
            p.kind = "shape"
        elif t in ("int *", "int64_t *"):
            p.kind = "pair" if p.name in _PAIRS else "ints"
        elif t == "char *":
            p.kind = "str"
        elif t in _ENUMS or t == "af_dtype":
            p.kind = "enum"
        elif t in ("int", "int64_t", "float", "uint64_t", "unsigned"):
            p.kind = "num"
        else:
            p.kind = "unknown"
    # `int n` / `int naxes` right before a list: the list's length, not an argument
    for i, p in enumerate(ps[:-1]):
        if p.kind == "num" and p.name in ("n", "naxes") and ps[i + 1].kind in ("tensors", "ints", "outlist"):
            p.kind = "count"
            ps[i + 1].count_of = i
    # af_split: n is the number of parts, sizes and out follow
    return ps


def _make_op(pyname, cname):
    ps = _plan(cname)
    if any(p.kind == "unknown" for p in ps):
        return None
    cfn = fn(cname)
    args_py = [p for p in ps if p.kind not in ("graph", "count", "outlist")]
    n_out = [p for p in ps if p.kind == "outlist"]
    doc = _cdefs.FUNCTIONS[cname][3]
    dflt = DEFAULTS.get(pyname, {})

    def _one(p):
        if p.name in dflt:
            return "%s=%r" % (p.name, dflt[p.name])
        return p.name + ("=None" if _optional(p.name) else "")
    sig = ", ".join(_one(p) for p in args_py)

    def op(*args, **kwargs):
        if len(args) > len(args_py):
            raise TypeError("%s() takes %d arguments (%s), %d given" % (pyname, len(args_py), sig, len(args)))
        vals = dict(zip([p.name for p in args_py], args))
        for k, v in kwargs.items():
            if k not in [p.name for p in args_py] or k in vals:
                raise TypeError("%s() got an unexpected or repeated argument %r (takes %s)" % (pyname, k, sig))
            vals[k] = v
        graph = None
        for p in args_py:
            v = vals.get(p.name)
            if isinstance(v, Tensor):
                graph = v.graph
                break
            if p.kind == "tensors" and v is not None:
                for t in v:
                    if isinstance(t, Tensor):
                        graph = t.graph
                        break
                if graph is not None:
                    break
        if graph is None:
            raise InvalidError("%s() needs at least one Tensor operand" % pyname)
        cargs, keep, srcs = [], [], []
        first_rank = None
        outs = None
        for i, p in enumerate(ps):
            if p.kind == "graph":
                cargs.append(graph.ptr)
                continue
            if p.kind == "count":
                cargs.append(None)  # filled once the list is converted
                continue
            if p.kind == "outlist":
                n = cargs[ps.index(next(q for q in ps if q.name == "n"))] if any(q.name == "n" for q in ps) else 0
                outs = (ctypes.c_void_p * max(1, int(n)))()
                cargs.append(outs)
                continue
            if p.name not in vals and p.name in DEFAULTS.get(pyname, {}):
                vals[p.name] = DEFAULTS[pyname][p.name]
            if p.name not in vals:
                if p.kind in ("tensor", "pair") and _optional(p.name):
                    vals[p.name] = None
                else:
                    raise TypeError("%s() missing argument %r (takes %s)" % (pyname, p.name, sig))
            v = vals[p.name]
            if p.kind == "tensor":
                if v is None:
                    cargs.append(None)
                    continue
                t = v if isinstance(v, Tensor) else graph.const(v)
                _same_graph(pyname, graph, t)
                if first_rank is None:
                    first_rank = t.ndim
                srcs.append(t)
                cargs.append(t.ptr)
            elif p.kind == "tensors":
                ts = [t if isinstance(t, Tensor) else graph.const(t) for t in v]
                for t in ts:
                    _same_graph(pyname, graph, t)
                srcs.extend(ts)
                arr = (ctypes.c_void_p * max(1, len(ts)))(*[t.ptr for t in ts])
                keep.append(arr)
                cargs.append(arr)
                if p.count_of is not None:
                    cargs[p.count_of] = len(ts)
            elif p.kind in ("ints", "pair"):
                ctype = ctypes.c_int64 if "int64_t" in p.ctype else ctypes.c_int
                if v is None:
                    cargs.append(None)
                    if p.count_of is not None:
                        cargs[p.count_of] = 0
                    continue
                if p.kind == "pair":
                    v = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
                    if len(v) != 2:
                        raise InvalidError("%s(): %s is one int or a pair (h, w), not %r" % (pyname, p.name, v))
                else:
                    v = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
                    need = _ints_len(p.name, first_rank, vals)
                    if need is not None and len(v) != need:
                        raise InvalidError("%s(): %s has %d entries; it needs %d (one per axis of the operand)"
                                           % (pyname, p.name, len(v), need))
                arr = (ctype * max(1, len(v)))(*[int(x) for x in v])
                keep.append(arr)
                cargs.append(arr)
                if p.count_of is not None:
                    cargs[p.count_of] = len(v)
            elif p.kind == "shape":
                v = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
                cargs.append(shape_struct(v))
            elif p.kind == "str":
                cargs.append(encode(v, p.name))
            elif p.kind == "enum":
                cargs.append(_enum(p.ctype, v))
            else:
                if isinstance(v, Tensor) or v is None:
                    raise TypeError("%s(): %s is a number, not %r" % (pyname, p.name, v))
                cargs.append(v)
        recipe = (pyname, args, dict(kwargs))
        r = cfn(*cargs)
        if outs is not None:
            check(r)
            return [Tensor(graph, outs[i], ("_split_part", i, recipe), tuple(srcs)) for i in range(len(outs))]
        if not r:
            raise GraphError("%s(): %s" % (pyname, last_error() or graph.error or "failed"))
        return Tensor(graph, r, recipe, tuple(srcs))

    params = []
    for p in args_py:
        d = dflt[p.name] if p.name in dflt else (None if _optional(p.name) else inspect.Parameter.empty)
        params.append(inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d))
    try:
        op.__signature__ = inspect.Signature(params)
    except ValueError:  # a default before a required parameter: keep the plain form
        pass
    op.__name__ = op.__qualname__ = pyname
    op.__doc__ = "%s(%s)\n\n%s\n\n(C: %s)" % (pyname, sig, doc, cname)
    op._cname = cname
    return op


def _optional(name):
    """C parameters documented as 'NULL for none / default' in the header."""
    return name in ("gamma", "beta", "mask", "bq", "bk", "bv", "bo", "stride", "pad", "dilation")


def _ints_len(name, rank, vals):
    if name in ("perm", "begin", "size"):
        return rank
    if name == "sizes":
        return vals.get("n")
    return None


def _same_graph(op, graph, t):
    if t.graph is not graph:
        raise InvalidError("%s(): operands come from different graphs" % op)


def _enum(ctype, v):
    if isinstance(v, str):
        t = ctype.replace("const ", "").strip()
        if t == "af_dtype":
            return dtype_code(v)
        key = _ENUMS.get(t, "") + v.upper()
        if key in C:
            return C[key]
        raise InvalidError("%r is not one of %s" % (v, [k[len(_ENUMS[t]):].lower() for k in C if k.startswith(_ENUMS[t])]))
    if ctype.replace("const ", "").strip() == "af_dtype" and not isinstance(v, int):
        return dtype_code(v)
    return int(v)


def _generate():
    ops, internal = {}, {}
    table = op_table()
    for name in table:
        cname = ALIASES.get(name, "af_" + name)
        if name in INTERNAL:
            internal[name] = INTERNAL[name]
            continue
        if cname in _HAND:
            continue
        if cname not in _cdefs.FUNCTIONS:
            internal[name] = "no public builder in the header"
            continue
        op = _make_op(name, cname)
        if op is None:
            internal[name] = "its C parameters have no Python conversion"
            continue
        ops[name] = op
    # the header's other builders that return a tensor (layers, transformer pieces)
    for cname, (ret, args, raw, doc, cret) in _cdefs.FUNCTIONS.items():
        pyname = cname[3:]
        if pyname in ops or cname in _LEAVES or cname in _HAND or not raw:
            continue
        if cret.replace(" ", "") != "af_tensor*" or not raw[0][0].replace(" ", "").startswith("af_tensor*"):
            continue
        op = _make_op(pyname, cname)
        if op is not None:
            ops[pyname] = op
    return ops, internal


OPS, INTERNAL_OPS = _generate()
_matmul_c = OPS["matmul"]


def matmul(a, b, transpose_a=False, transpose_b=False):
    """a[..., M, K] @ b[..., K, N] with broadcast batch dims (af_matmul); the flags
    transpose the last two axes of an operand first. (C: af_matmul)"""
    return _matmul_c(a, b, int(bool(transpose_a)), int(bool(transpose_b)))


matmul._cname = "af_matmul"
OPS["matmul"] = matmul
def einsum(equation, *operands):
    """NumPy's einsum over one or two tensors (af_einsum): einsum("ij,jk->ik", a, b).
    The engine's native "nchw,nwhu->nchu" becomes one einsum node; other equations
    become reduce_sum, transpose, reshape and matmul nodes. (C: af_einsum)"""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise InvalidError("einsum(): the operands are one or two Tensors")
    g = operands[0].graph
    for t in operands:
        _same_graph("einsum", g, t)
    arr = (ctypes.c_void_p * len(operands))(*[t.ptr for t in operands])
    r = lib.af_einsum(g.ptr, encode(equation, "equation"), len(operands), arr)
    if not r:
        raise GraphError("einsum(): %s" % (last_error() or g.error))
    return Tensor(g, r, ("einsum", (equation,) + tuple(operands), {}), tuple(operands))


def split(x, axis, sizes):
    """Splits x along axis into parts: `sizes` is the number of equal parts or a list of
    sizes. Returns a list of tensors. (C: af_split)"""
    if not isinstance(x, Tensor):
        raise InvalidError("split(): x is a Tensor, not %s" % type(x).__name__)
    n = int(sizes) if isinstance(sizes, (int, np.integer)) else len(sizes)
    if n < 1:
        raise InvalidError("split(): at least one part")
    sz = None if isinstance(sizes, (int, np.integer)) else (ctypes.c_int64 * n)(*[int(s) for s in sizes])
    out = (ctypes.c_void_p * n)()
    st = lib.af_split(x.ptr, int(axis), n, sz, out)
    if st:
        raise GraphError("split(): %s" % (last_error() or x.graph.error))
    return [Tensor(x.graph, out[i], ("_split_part", i, ("split", (x, axis, sizes), {})), (x,)) for i in range(n)]


split._cname = "af_split"
OPS["split"] = split


einsum._cname = "af_einsum"
OPS["einsum"] = einsum


def _unary_methods():
    for name, op in OPS.items():
        if op is None or hasattr(Tensor, name):
            continue
        setattr(Tensor, name, op)


_unary_methods()
