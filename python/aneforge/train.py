"""Training (src/train through af_trainer): Trainer and UnrolledTrainer with seed 000's
options, built-in nets, checkpoints, progress, and Adam as graph ops."""
import ctypes
import json
import os

import numpy as np

from . import _cdefs
from ._lib import C, Handle, check, encode, last_error, lib, shape_struct, shape_tuple
from .errors import ClosedError, Error, InvalidError
from .graph import Graph, Tensor, OPS
from .model import Loss, Stats, _reachable, compile_opts

_step = lib.af_trainer_step
_PLANS = {"host": 0, "device": 1, "resident": 2, "unrolled": 3, "pipeline": 4}
_MAKE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)
_FWD = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_LOSS = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class TrainOptions:
    """af_train_opts from keywords. Seed 000's names: optimizer "adam"/"sgd",
    device_optimizer (the update runs as programs), resident (state stays in the program),
    loss_scale; the rest are the C fields (lr, beta1, beta2, eps, weight_decay, schedule
    "constant"/"cosine", warmup_steps, total_steps, min_lr_ratio, dynamic_loss_scale,
    scale_growth_interval, plan, unroll, batch, eval_batch, grad_clip, grad_accum) and the
    compile options (target, precision, threads, via_mil, precision_check, sim_engine)."""

    COMPILE = ("target", "precision", "threads", "via_mil", "precision_check", "sim_engine", "ane_framework")

    def __init__(self, **kw):
        o = lib.af_train_defaults()
        comp = {k: kw.pop(k) for k in self.COMPILE if k in kw}
        dev = kw.pop("device_optimizer", None)
        resident = kw.pop("resident", None)
        opt = kw.pop("optimizer", "adam")
        if opt not in ("adam", "sgd"):
            raise InvalidError("optimizer %r: 'adam' or 'sgd'" % (opt,))
        o.optimizer = C["AF_OPT_ADAM"] if opt == "adam" else C["AF_OPT_SGD"]
        sched = kw.pop("schedule", "constant")
        if sched not in ("constant", "cosine"):
            raise InvalidError("schedule %r: 'constant' or 'cosine'" % (sched,))
        o.schedule = C["AF_LR_CONSTANT"] if sched == "constant" else C["AF_LR_COSINE"]
        plan = kw.pop("plan", None)
        if plan is None:
            plan = "resident" if dev and resident else "device" if dev else "host"
        if plan not in _PLANS:
            raise InvalidError("plan %r: one of %s" % (plan, list(_PLANS)))
        o.plan = _PLANS[plan]
        if resident is not None and plan in ("unrolled", "resident"):
            o.shuttle_state = 0 if resident else 1
        obj = kw.pop("objective", None)
        if obj is not None:
            o.objective = {"ce": 0, "mse": 1, "custom": 2}[obj]
        for k, v in kw.items():
            if k not in [f for f, _ in _cdefs.af_train_opts._fields_] or k == "compile":
                raise InvalidError("unknown training option %r" % k)
            setattr(o, k, v)
        co, self._keep = compile_opts(**comp)
        if "loss_scale" not in kw:  # the CLI's default: 128 in fp16, else 1
            fp16 = co.precision == 2 or (co.precision == 0 and co.target != 0)
            o.loss_scale = 128.0 if fp16 else 1.0
        o.compile = co
        self.c = o
        self.sim_engine = comp.get("sim_engine")


class StepInfo:
    """What a step did (af_step_info): step, skipped, skipped_consecutive, skipped_now,
    loss, accuracy, lr, loss_scale, grad_norm, metric_source, stats, epoch. A copy of the
    C struct read on demand, so a step costs Python no more than this copy."""
    __slots__ = ("_i", "epoch")

    def __init__(self, i, epoch=None):
        self._i = _cdefs.af_step_info.from_buffer_copy(i)
        self.epoch = epoch

    def __getattr__(self, k):
        if k == "metric_source":
            return ctypes.string_at(lib.af_metric_source_name(self._i.metric_source)).decode()
        if k == "stats":
            return Stats(self._i.stats)
        return getattr(self._i, k)

    def __repr__(self):
        return "StepInfo(step=%d, loss=%.5f, accuracy=%.4f, lr=%.3g, skipped=%d)" % (
            self.step, self.loss, self.accuracy, self.lr, self.skipped)


# ------------------------------------------------------------------ nets

class _Borrowed(Graph):
    """The trainer's graph while its callbacks build in it: not ours to free; closed when
    af_trainer_new returns, so tensors kept from a callback cannot touch it later."""
    _free = None

    def __init__(self, p):
        self._ptr, self._names = p, 0


class Net:
    """A model given as code for the trainer (af_net)."""
    sample = None
    out_dim = None
    objective = None

    def c_net(self):
        """The af_net the C trainer runs (subclasses build it)."""
        raise NotImplementedError

    def release(self):
        """Frees what c_net made; a trainer calls it when closed."""
        pass


class BuiltinNet(Net):
    """One of the library's nets (af_net_mlp, af_net_cnn, af_net_llama)."""

    def __init__(self, net, sample, out_dim, objective="ce", llama=None):
        self._net, self.sample, self.out_dim, self.objective = net, sample, out_dim, objective
        self.llama = llama

    def c_net(self):
        """The library's af_net (None once a trainer released it)."""
        return self._net

    def release(self):
        """Frees the library's net (af_net_free)."""
        if self._net is not None:
            lib.af_net_free(ctypes.byref(self._net))
            self._net = None


class nets:
    """The library's built-in models (the CLI's `train mlp|cnn` nets)."""

    @staticmethod
    def mlp(sample=(1, 28, 28), hidden=128, classes=10, seed=1, input_norm=None):
        """784-128-10 with ReLU (any sample shape: flattened); PyTorch-style init from seed.
        input_norm (mean, std) standardises inside the graph (the CLI's per-dataset one)."""
        n = lib.af_net_mlp(shape_struct(sample), int(hidden), int(classes), int(seed))
        if not n.forward:
            check(C["AF_ERR_INVALID"])
        if input_norm:
            lib.af_net_set_input_norm(ctypes.byref(n), float(input_norm[0]), float(input_norm[1]))
        return BuiltinNet(n, tuple(sample), classes)

    @staticmethod
    def cnn(sample=(1, 28, 28), classes=10, seed=1, input_norm=None):
        """conv3x3(C->16)-ReLU-avgpool-conv3x3(16->32)-ReLU-avgpool-linear."""
        n = lib.af_net_cnn(shape_struct(sample), int(classes), int(seed))
        if not n.forward:
            check(C["AF_ERR_INVALID"])
        if input_norm:
            lib.af_net_set_input_norm(ctypes.byref(n), float(input_norm[0]), float(input_norm[1]))
        return BuiltinNet(n, tuple(sample), classes)


class PyNet(Net):
    """A net whose forward is Python: forward(P, x) -> output [B, out_dim] from the
    current weights P (aligned with params) and a batch x; loss(output, target) -> a Loss
    or scalar Tensor for the custom objective."""

    def __init__(self, params, forward, sample, out_dim, objective="ce", loss=None):
        self.params = list(params)
        for p in self.params:
            if not isinstance(p, Tensor) or not p.is_parameter:
                raise InvalidError("params are trainable leaves (af.parameter / af.conv_param), not %r" % (p,))
        self.forward, self.loss = forward, loss
        self.sample, self.out_dim, self.objective = tuple(sample), int(out_dim), objective
        self.error = None
        self._graphs = []
        self._inits = [(p.name, p.value, p._conv) for p in self.params]
        self._cb = (_MAKE(self._make), _FWD(self._fwd), _LOSS(self._loss) if loss else None)

    def c_net(self):
        """An af_net whose callbacks run this object's Python forward and loss."""
        n = _cdefs.af_net()
        n.make_params = ctypes.cast(self._cb[0], ctypes.c_void_p)
        n.forward = ctypes.cast(self._cb[1], ctypes.c_void_p)
        n.loss = ctypes.cast(self._cb[2], ctypes.c_void_p) if self._cb[2] else None
        n.sample = shape_struct(self.sample)
        n.out_dim = self.out_dim
        return n

    def _graph(self, gp):
        for g in self._graphs:
            if g._ptr == gp:
                return g
        g = _Borrowed(gp)
        self._graphs.append(g)
        return g

    def _guard(self, fn, *a):
        if self.error is not None:
            return None
        try:
            return fn(*a)
        except BaseException as e:  # never unwind through C; re-raised after af_trainer_new
            self.error = e
            return None

    def _make(self, ctx, gp, out, mx):
        def go():
            g = self._graph(gp)
            if len(self._inits) > mx:
                raise InvalidError("%d params; the trainer takes at most %d" % (len(self._inits), mx))
            for i, (name, val, conv) in enumerate(self._inits):
                if conv is not None:  # back to PyTorch layout from the patch matrix [Cin*kH*kW, Cout]
                    t = g.conv_param(name, val.T.reshape(conv))
                else:
                    t = g.parameter(name, val)
                out[i] = t.ptr
            return len(self._inits)
        r = self._guard(go)
        return -1 if r is None else r

    def _fwd(self, ctx, xp, wp):
        def go():
            gp = lib.af_tensor_graph(xp)
            g = self._graph(gp)
            x = Tensor(g, xp, ("input", "x", None, 0), ())
            P = []
            for i, (_, _, conv) in enumerate(self._inits):
                t = Tensor(g, wp[i], ("parameter", "w%d" % i, None), ())
                t._conv = conv
                P.append(t)
            y = self.forward(P, x)
            if not isinstance(y, Tensor):
                raise InvalidError("forward(P, x) must return a Tensor, not %s" % type(y).__name__)
            return y.ptr
        r = self._guard(go)
        return r or None

    def _loss(self, ctx, op, tp):
        def go():
            g = self._graph(lib.af_tensor_graph(op))
            L = self.loss(Tensor(g, op, ("output",), ()), Tensor(g, tp, ("input", "target", None, 0), ()))
            if isinstance(L, Tensor):
                from .model import loss_scalar
                L = loss_scalar(L)
            if not isinstance(L, Loss):
                raise InvalidError("loss(output, target) must return a Loss or a scalar Tensor")
            return L.ptr
        r = self._guard(go)
        return r or None

    def release(self):
        """Closes the graphs the callbacks made; the trainer owned them."""
        for g in self._graphs:
            g._ptr = None  # the trainer owns it; wrappers kept from callbacks now raise
        self._graphs = []


def _rebuild(t, subst, g, memo):
    """Rebuilds tensor t in graph g from its recipe, with the tensors of `subst` replaced
    (seed 000's Trainer takes the loss as built; the C trainer wants the model as code)."""
    if id(t) in subst:
        return subst[id(t)]
    if id(t) in memo:
        return memo[id(t)]
    r = t.recipe
    kind = r[0]
    if kind == "const":
        out = g.const(r[2], r[1])
    elif kind == "fill":
        out = g.fill(r[1], r[2])
    elif kind in ("input", "parameter", "conv_param"):
        raise InvalidError("the loss depends on %s %r, which is neither the data input nor a trained param; "
                           "pass it in params= or x=" % (kind, r[1]))
    elif kind == "_split_part":
        parts = _rebuild_call(r[2], subst, g, memo)
        out = parts[r[1]]
    elif kind in OPS or kind == "einsum" or kind == "split":
        out = _rebuild_call(r, subst, g, memo)
    else:
        raise InvalidError("the Trainer cannot rebuild a %r tensor from the loss's graph" % kind)
    memo[id(t)] = out
    return out


def _rebuild_call(r, subst, g, memo):
    key = ("call", id(r))
    if key in memo:
        return memo[key]

    def conv(v):
        if isinstance(v, Tensor):
            return _rebuild(v, subst, g, memo)
        if isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v):
            return type(v)(conv(x) for x in v)
        return v
    name, args, kwargs = r
    out = OPS[name](*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
    memo[key] = out
    return out


class LossNet(PyNet):
    """seed 000's form: the loss as built (a Loss from softmax_cross_entropy / mse, or a
    scalar loss Tensor with output=), replayed by the trainer in its own graph."""

    def __init__(self, loss, params=None, x=None, output=None):
        if isinstance(loss, Loss) and loss.kind in ("ce", "mse"):
            out, target, objective = loss.srcs[0], loss.srcs[1], loss.kind
            lossfn = None
        else:
            if output is None:
                raise InvalidError("a scalar loss Tensor needs output= (the model's output [B, out_dim])")
            sl = loss.value if isinstance(loss, Loss) else loss
            out, objective = output, "custom"
            inputs = [t for t in _reachable([sl]) if t.recipe[0] == "input"]
            outs_in = {id(t) for t in _reachable([output])}
            tgt = [t for t in inputs if id(t) not in outs_in]
            if len(tgt) != 1:
                raise InvalidError("the loss must depend on exactly one input besides the model's (the target); found %d" % len(tgt))
            target = tgt[0]

            def lossfn(o, t):
                return _rebuild(sl, {id(out): o, id(target): t}, o.graph, {})
        leaves = _reachable([out])
        if params is None:
            params = [t for t in leaves if t.recipe[0] in ("parameter", "conv_param")]
        if x is None:
            xs = [t for t in leaves if t.recipe[0] == "input" and t is not target]
            if len(xs) != 1:
                raise InvalidError("the model's output depends on %d inputs; name the data input with x=" % len(xs))
            x = xs[0]
        if target.shape[0] != x.shape[0] or len(out.shape) != 2:
            raise InvalidError("the output must be [B, out_dim] with the batch of x; got %s for x %s" %
                               (list(out.shape), list(x.shape)))
        self.x, self.target, self.output = x, target, out
        self.batch = x.shape[0]
        params = list(params)

        def forward(P, xb):
            subst = {id(p): w for p, w in zip(params, P)}
            subst[id(x)] = xb
            try:
                return _rebuild(out, subst, xb.graph, {})
            except Error as e:
                if xb.shape[0] == self.batch:
                    raise
                raise type(e)("%s (the Trainer rebuilds the model for its evaluation batch of %d as well: write "
                              "shapes that hold the batch with -1, e.g. x.reshape(-1, 784))" % (e, xb.shape[0])) from None
        super().__init__(params, forward, x.shape[1:], out.shape[-1], objective, lossfn)


# ------------------------------------------------------------------ the trainer

def _shuffle(n, state):
    """tools/cmd_train.c's shuffle (splitmix64 Fisher-Yates), so a seed gives the CLI's
    data order. Returns (perm, new state)."""
    m = n - 1
    if m <= 0:
        return np.arange(n, dtype=np.int64), state
    with np.errstate(over="ignore"):
        z = (np.uint64(state) + np.arange(1, m + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    js = (z % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
    perm = list(range(n))
    for k, i in enumerate(range(n - 1, 0, -1)):
        j = js[k]
        perm[i], perm[j] = perm[j], perm[i]
    new = (int(state) + m * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return np.asarray(perm, np.int64), new


class Trainer(Handle):
    """Trains a model (af_trainer). The model is one of:
      - a Loss from af.softmax_cross_entropy(logits, onehot) / af.mse(pred, target), or a
        scalar loss Tensor with output= (seed 000: the graph as built is replayed);
      - forward(P, x) with params= (a Python function of the weights and a batch);
      - a built-in net (af.nets.mlp / af.nets.cnn / af.llama.net).
    Options: TrainOptions' keywords (optimizer, device_optimizer, resident, loss_scale,
    lr, schedule, target, precision, ...). dataset=(X, Y) (Y one-hot or values) lets
    step() draw minibatches itself in the CLI's order for `seed`. The GIL is released
    while programs compile and steps run."""
    _free = "af_trainer_free"
    _kind = "trainer"

    def __init__(self, model, params=None, *, forward=None, dataset=None, x=None, output=None, sample=None,
                 out_dim=None, kind=None, loss=None, seed=1, **opts):
        self._net = None
        if callable(model) and not isinstance(model, (Tensor, Loss, Net)):
            forward, model = model, None
        if forward is not None:
            if params is None:
                raise InvalidError("forward(P, x) needs params=")
            if sample is None or out_dim is None:
                raise InvalidError("a forward function needs sample= (one sample's shape) and out_dim=")
            net = PyNet(params, forward, sample, out_dim, kind or ("custom" if loss else "ce"), loss)
        elif isinstance(model, Net):
            net = model
        elif isinstance(model, (Loss, Tensor)):
            net = LossNet(model, params, x, output)
            opts.setdefault("batch", net.batch)
        else:
            raise InvalidError("Trainer(model): a Loss, a scalar loss Tensor, forward(P, x) or a built-in net")
        if "objective" not in opts and net.objective:
            opts["objective"] = net.objective
        self.options = TrainOptions(**opts)
        self._sim = self.options.sim_engine
        cnet = net.c_net()
        try:
            p = lib.af_trainer_new(ctypes.byref(cnet), ctypes.byref(self.options.c))
        finally:
            net.release()
        if getattr(net, "error", None) is not None:
            if p:
                lib.af_trainer_free(p)
            raise net.error
        if not p:
            raise _status_error()
        super().__init__(p)
        self.net = net
        self.sample, self.out_dim = tuple(net.sample), int(net.out_dim)
        self.user_params = list(getattr(net, "params", []))
        self.batch = self.options.c.batch
        self.steps_per_call = lib.af_trainer_steps_per_call(p)
        self.batches_per_call = lib.af_trainer_batches_per_call(p)
        self._info = _cdefs.af_step_info()
        self._info_ref = ctypes.byref(self._info)
        n = self.batch * self.batches_per_call
        self._nx, self._nt = n * int(np.prod(self.sample)), n * self.out_dim
        self.epoch = 0
        self.last = None
        self.seed = int(seed)
        self._data = None
        if dataset is not None:
            self.set_dataset(dataset)
        self._shapes = [shape_tuple(lib.af_tensor_shape(lib.af_trainer_param(p, i))) for i in range(self.num_params)]

    # data order (the CLI's)
    def set_dataset(self, dataset):
        """Trains on (X, Y) arrays from now on, in a seeded shuffled order, from epoch 0."""
        X, Y = dataset
        X = np.ascontiguousarray(X, np.float32)
        Y = np.ascontiguousarray(Y, np.float32)
        if len(X) != len(Y):
            raise InvalidError("dataset: %d samples and %d targets" % (len(X), len(Y)))
        per = self.batch * self.batches_per_call
        if len(X) < per:
            raise InvalidError("dataset of %d samples cannot fill one step of %d" % (len(X), per))
        self._data = (X, Y)
        self.calls_per_epoch = len(X) // per
        self.epoch, self.pos, self._rng = 0, 0, (self.seed * 0x2545F4914F6CDD1D + 1) & 0xFFFFFFFFFFFFFFFF
        self._perm = None

    def _next_batch(self):
        if self._data is None:
            raise InvalidError("step() without data needs dataset=(X, Y)")
        if self._perm is None:
            self._perm, self._rng_next = _shuffle(len(self._data[0]), self._rng)
        per = self.batch * self.batches_per_call
        idx = self._perm[self.pos * per:(self.pos + 1) * per]
        self.pos += 1
        if self.pos == self.calls_per_epoch:
            self.epoch, self.pos, self._rng, self._perm = self.epoch + 1, 0, self._rng_next, None
        return self._data[0][idx], self._data[1][idx]

    @property
    def num_params(self):
        """The number of parameter tensors."""
        return lib.af_trainer_num_params(self.ptr)

    def step(self, x=None, target=None):
        """One call: steps_per_call optimizer steps on batches_per_call batches (x
        [batches * batch, sample...], target one-hot rows or values); without x, the next
        minibatches of the dataset. Returns a StepInfo."""
        ptr = self.ptr
        if x is None:
            x, target = self._next_batch()
        xs = np.ascontiguousarray(x, np.float32)  # no copy when already float32, C order
        ts = np.ascontiguousarray(target, np.float32)
        if xs.size != self._nx or ts.size != self._nt:
            n = self.batch * self.batches_per_call
            raise InvalidError("step(): x holds %d values and target %d; this trainer takes %d samples of %s and %d "
                               "targets of %d" % (xs.size, ts.size, n, list(self.sample), n, self.out_dim))
        st = _step(ptr, xs.__array_interface__["data"][0], ts.__array_interface__["data"][0], self._info_ref)
        if st:
            check(st)
        self.last = StepInfo(self._info, self.epoch)
        return self.last

    def loss(self):
        """The last step's mean loss (host fp32 or in-program, see StepInfo.metric_source)."""
        return self.last.loss if self.last else float("nan")

    def predict(self, x, batch=None):
        """The evaluation program on n samples: [n, out_dim]."""
        xs = np.ascontiguousarray(x, np.float32)
        n = xs.size // max(1, int(np.prod(self.sample)))
        if xs.size != n * int(np.prod(self.sample)):
            raise InvalidError("predict(): x does not hold whole samples of %s" % list(self.sample))
        out = np.empty((n, self.out_dim), np.float32)
        check(lib.af_trainer_predict(self.ptr, n, xs.ctypes.data, out.ctypes.data))
        return out

    def accuracy(self, x, labels, chunk=2000):
        """Fraction of samples whose argmax of predict() is the label."""
        labels = np.asarray(labels)
        if labels.ndim == 2:
            labels = labels.argmax(1)
        correct = 0
        for b in range(0, len(labels), chunk):
            correct += int((self.predict(x[b:b + chunk]).argmax(1) == labels[b:b + chunk]).sum())
        return correct / len(labels)

    def fit(self, epochs=1, callback=None, every=1):
        """Trains `epochs` epochs of the dataset; callback(info) after every `every` calls
        (return True to stop). Returns the last StepInfo."""
        for info in self.iter(epochs):
            if callback and (info.step // self.steps_per_call) % every == 0 and callback(info):
                break
        return self.last

    def iter(self, epochs=1):
        """Progress as an iterator: yields a StepInfo per call over `epochs` epochs."""
        if self._data is None:
            raise InvalidError("iter()/fit() need dataset=(X, Y)")
        end = self.epoch + epochs
        while self.epoch < end:
            yield self.step()

    def params(self):
        """Current values of the params (reading resident state back when needed)."""
        out = []
        for i, shp in enumerate(self._shapes):
            a = np.empty(shp, np.float32)
            check(lib.af_trainer_read_param(self.ptr, i, a.ctypes.data))
            out.append(a)
        return out

    def sync(self):
        """Copies the trained values into the user's param tensors' master values, so
        models compiled from their graph use them."""
        for p, v in zip(self.user_params, self.params()):
            p.value = v

    @property
    def stats(self):
        """The trainer's counters (dispatches, FLOPs, bytes) as a Stats."""
        s = _cdefs.af_stats()
        lib.af_trainer_stats(self.ptr, ctypes.byref(s))
        return Stats(s)

    @property
    def plan(self):
        """The training plan in use by name ("host", "device", ...)."""
        return ctypes.string_at(lib.af_plan_name(self.options.c.plan)).decode()

    # checkpoints
    def save(self, path):
        """Checkpoint: weights, optimizer state, step, loss scale (atomic, checksummed),
        plus the data position beside it (<path>.pos) when the trainer draws its batches."""
        check(lib.af_trainer_save(self.ptr, encode(path, "path")))
        if self._data is not None:
            pos = {"epoch": self.epoch, "pos": self.pos, "rng": self._rng, "seed": self.seed}
            tmp = os.fspath(path) + ".pos.tmp"
            with open(tmp, "w") as f:
                json.dump(pos, f)
            os.replace(tmp, os.fspath(path) + ".pos")

    def resume(self, path):
        """Loads a checkpoint from save(): the next steps are bit-identical to the run that
        saved it."""
        check(lib.af_trainer_load(self.ptr, encode(path, "path")))
        side = os.fspath(path) + ".pos"
        if self._data is not None and os.path.exists(side):
            with open(side) as f:
                pos = json.load(f)
            self.epoch, self.pos, self._rng, self._perm = pos["epoch"], pos["pos"], pos["rng"], None

    load = resume


def _status_error():
    from .errors import raise_status
    msg = last_error()
    try:
        raise_status(C["AF_ERR_INVALID"], "Trainer: " + msg)
    except Error as e:
        return e


class UnrolledTrainer(Trainer):
    """seed 000's UnrolledTrainer: K steps unrolled into one program (K = len(x_inputs)),
    state resident in it (resident=True) or shuttled around each K-step block.
    params: the trainable leaves; forward(P, x) builds the model from the step's weights;
    kind "ce" or "mse"; x_inputs / t_inputs the K data / target placeholders (they fix K
    and the batch); dataset (X, Y)."""

    def __init__(self, params, forward, kind="ce", x_inputs=None, t_inputs=None, dataset=None, resident=True,
                 K=None, **opts):
        if x_inputs is None and K is None:
            raise InvalidError("UnrolledTrainer needs x_inputs (one placeholder per step) or K=")
        K = int(K or len(x_inputs))
        if x_inputs is not None:
            x0 = x_inputs[0]
            opts.setdefault("batch", x0.shape[0])
            sample = x0.shape[1:]
            out_dim = t_inputs[0].shape[-1] if t_inputs else opts.pop("out_dim")
        else:
            sample, out_dim = opts.pop("sample"), opts.pop("out_dim")
        super().__init__(None, params, forward=forward, dataset=dataset, sample=sample, out_dim=out_dim, kind=kind,
                         plan="unrolled", unroll=K, resident=resident, **opts)
        self.K = K


# ------------------------------------------------------------------ Adam as graph ops

def adam_lr_t(lr, beta1, beta2, t):
    """lr sqrt(1 - beta2^t) / (1 - beta1^t): Adam step t's rate with its bias correction."""
    return lib.af_adam_lr_t(float(lr), float(beta1), float(beta2), int(t))


def adam_step(params, grads, m, r, lr_t, decay=None, beta1=0.9, beta2=0.999, eps=1e-8):
    """One Adam update as graph ops over lists (af_adam_step): returns (w', m', r') lists
    (r is the second moment's square root). lr_t / decay are one-element tensors."""
    n = len(params)
    if not (len(grads) == len(m) == len(r) == n):
        raise InvalidError("adam_step(): params, grads, m and r have one entry each per param")
    arr = lambda ts: (ctypes.c_void_p * max(1, n))(*[t.ptr for t in ts])  # noqa: E731
    o = _cdefs.af_adam_opts(beta1, beta2, eps)
    wn, mn, rn = [(ctypes.c_void_p * max(1, n))() for _ in range(3)]
    g = lr_t.graph
    check(lib.af_adam_step(n, arr(params), arr(grads), arr(m), arr(r), lr_t.ptr, decay.ptr if decay else None,
                           ctypes.byref(o), wn, mn, rn))
    mk = lambda a, i, src: Tensor(g, a[i], ("_adam", i), src)  # noqa: E731
    W = [mk(wn, i, (params[i], grads[i], m[i], r[i], lr_t)) for i in range(n)]
    for w, p in zip(W, params):
        w._conv = p._conv
    return W, [mk(mn, i, (m[i], grads[i])) for i in range(n)], [mk(rn, i, (r[i], grads[i])) for i in range(n)]


class Dist(Handle):
    """The MPI job this process belongs to (started with ``mpirun -np N python ...``), for
    data-parallel training: ``Trainer.set_distributed(dist)``. Raises UnsupportedError
    when the library was built without MPI. ``close()`` leaves the job (MPI_Finalize):
    close trainers that use it first."""
    _free = "af_dist_free"
    _kind = "dist"

    def __init__(self, timeout_s=0.0):
        p = lib.af_dist_mpi(float(timeout_s))
        if not p:
            check(3 if "without MPI" in (last_error() or "") else 5)  # AF_ERR_UNSUPPORTED, AF_ERR_IO
        super().__init__(p)

    @property
    def rank(self):
        """This process's rank (0 .. size - 1)."""
        return lib.af_dist_rank(self.ptr)

    @property
    def size(self):
        """The number of processes."""
        return lib.af_dist_size(self.ptr)

    def shard(self, global_batch):
        """This rank's rows of a global batch of size x B rows: [rank B, (rank + 1) B)."""
        b = len(global_batch) // self.size
        return global_batch[self.rank * b:(self.rank + 1) * b]

    def stats(self):
        """(bytes all-reduced, seconds communicating) by this rank, all calls."""
        b, s = ctypes.c_int64(), ctypes.c_double()
        lib.af_dist_stats(self.ptr, ctypes.byref(b), ctypes.byref(s))
        return b.value, s.value


def _set_distributed(self, dist, sync_every=8):
    """Trains data-parallel over dist (collective: every rank calls it): rank 0's state
    is broadcast now; the host and pipeline plans average gradients before every step, the
    in-program plans average parameters and moments every sync_every steps. Each rank
    feeds its own shard (Dist.shard) of every global batch. None: alone again."""
    check(lib.af_trainer_set_dist(self.ptr, dist.ptr if dist is not None else None, int(sync_every)))
    self._dist = dist


def _dist_sync(self):
    """Averages parameters and moments over the ranks now (collective)."""
    check(lib.af_trainer_dist_sync(self.ptr))


Trainer.set_distributed = _set_distributed
Trainer.dist_sync = _dist_sync
