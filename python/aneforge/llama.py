"""llama2.c models: configs, load/save of its model files, streaming generation with
run.c's sampler, and training through the trainer (af_net_llama)."""
import ctypes

import numpy as np

from . import _cdefs
from ._lib import C, Handle, check, encode, last_error, lib
from .errors import CorruptError, InvalidError
from .train import BuiltinNet

FIELDS = [f for f, _ in _cdefs.af_llama_config._fields_]


def config(preset=None, vocab_size=32000, **fields):
    """A config dict: a preset ("tiny", "stories15m", "stories42m", "stories110m") with
    the vocab size, and/or explicit fields (dim, hidden_dim, n_layers, ...)."""
    c = _cdefs.af_llama_config()
    if preset:
        check(lib.af_llama_preset(encode(preset, "preset"), int(vocab_size), ctypes.byref(c)))
    else:
        c.vocab_size, c.shared_classifier = int(vocab_size), 1
    for k, v in fields.items():
        if k not in FIELDS:
            raise InvalidError("llama config has no field %r (fields: %s)" % (k, ", ".join(FIELDS)))
        setattr(c, k, int(v))
    check(lib.af_llama_config_check(ctypes.byref(c)))
    return {f: getattr(c, f) for f in FIELDS}


def _cconfig(cfg):
    c = _cdefs.af_llama_config()
    for k in FIELDS:
        setattr(c, k, int(cfg[k]))
    return c


class Weights(Handle):
    """A config and its weights in llama2.c's order (af_llama_weights). .data is a
    float32 NumPy view of the weights (alive as long as this object)."""
    _kind = "llama model"
    _free = None  # the memory belongs to _mem: views of .data and generators keep it alive
    _null_error = CorruptError

    def __init__(self, ptr, version=None):
        super().__init__(ptr)
        self._mem = _Mem(ptr)
        self.version = version

    def close(self):
        """Drops this object's hold on the weights; they are freed once no view of .data
        and no Generator uses them either."""
        self._ptr, self._mem = None, None

    @classmethod
    def new(cls, cfg):
        """Zero weights for a config (af.llama.config)."""
        c = _cconfig(cfg)
        p = lib.af_llama_weights_new(ctypes.byref(c))
        if not p:
            raise InvalidError(last_error())
        return cls(p)

    @property
    def config(self):
        """The model's config as a dict (dim, hidden_dim, n_layers, ...)."""
        c = _cdefs.af_llama_config.from_address(lib.af_llama_weights_config(self.ptr))
        return {f: getattr(c, f) for f in FIELDS}

    @property
    def data(self):
        """The weights as one writable float32 view, in llama2.c's file order."""
        c = _cconfig(self.config)
        n = lib.af_llama_weight_count(ctypes.byref(c))
        p = lib.af_llama_weights_data(self.ptr)
        a = np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), (n,))
        a.flags.writeable = True
        return _Keep(a, self._mem)

    def tensor(self, name, layer=0):
        """A view of one tensor ("wq", "token_embedding", ...) of `layer`."""
        names = {lib_name(i): i for i in range(12)}
        if name not in names:
            raise InvalidError("llama tensor %r: one of %s" % (name, sorted(names)))
        c = _cconfig(self.config)
        off, r, k = ctypes.c_int64(), ctypes.c_int(), ctypes.c_int()
        check(lib.af_llama_tensor_at(ctypes.byref(c), names[name], int(layer), ctypes.byref(off), ctypes.byref(r),
                                     ctypes.byref(k)))
        return self.data[off.value:off.value + r.value * k.value].reshape(r.value, k.value)

    def save(self, path, version=0):
        """A llama2.c model file: version 0 (run.c's) or 1; written atomically."""
        check(lib.af_llama_save(self.ptr, encode(path, "path"), int(version)))

    def generate(self, tokens=(1,), steps=256, temperature=0.0, top_p=0.9, seed=1, threads=0):
        """Streams run.c's tokens: yields each next id after feeding `tokens` (the prompt,
        BOS first); stops at BOS, seq_len or `steps` positions."""
        g = Generator(self, threads)
        s = Sampler(self.config["vocab_size"], temperature, top_p, seed)
        tokens = list(tokens) or [1]
        pos = 0
        tok = tokens[0]
        while pos < min(steps, self.config["seq_len"]):
            g.feed(tok)
            pos += 1
            if pos < len(tokens):
                tok = tokens[pos]
                continue
            nxt = s.sample(g.logits())
            if nxt == 1:
                return
            yield nxt
            tok = nxt


class _Mem:
    """Owns an af_llama_weights: freed when the last holder (Weights, views, generators)
    lets go."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        p, self.ptr = self.ptr, None
        if p:
            lib.af_llama_weights_free(p)


def lib_name(i):
    """The name of the library's llama tensor i (af_llama_tensor_name)."""
    return ctypes.string_at(lib.af_llama_tensor_name(i)).decode()


class _Keep(np.ndarray):
    """An ndarray view that keeps the object owning its memory alive."""

    def __new__(cls, a, owner):
        obj = a.view(cls)
        obj._owner = owner
        return obj

    def __array_finalize__(self, obj):
        self._owner = getattr(obj, "_owner", None)


def load(path):
    """Reads a llama2.c model file (version 0 or 1)."""
    v = ctypes.c_int()
    p = lib.af_llama_load(encode(path, "path"), ctypes.byref(v))
    return Weights(p, v.value if p else None)


def save(weights, path, version=0):
    """weights.save(path, version): a llama2.c model file, version 0 or 1, written atomically."""
    weights.save(path, version)


class Generator(Handle):
    """run.c's forward one token at a time with a KV cache (af_llama_gen)."""
    _free = "af_llama_gen_free"
    _kind = "generator"

    def __init__(self, weights, threads=0):
        p = lib.af_llama_gen_new(weights.ptr, int(threads))
        if not p:
            raise InvalidError(last_error())
        super().__init__(p)
        self._mem = weights._mem  # it borrows the weights: keep them alive, closed or not
        self.vocab = weights.config["vocab_size"]

    def feed(self, token):
        """Feeds one token id at the next position (af_llama_gen_feed)."""
        check(lib.af_llama_gen_feed(self.ptr, int(token)))

    def logits(self):
        """A copy of the logits after the last fed token (vocab floats)."""
        p = lib.af_llama_gen_logits(self.ptr)
        if not p:
            raise InvalidError("no logits before the first feed")
        return np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), (self.vocab,)).copy()

    @property
    def pos(self):
        """How many tokens were fed since the last reset."""
        return lib.af_llama_gen_pos(self.ptr)

    def reset(self):
        """Forgets the fed tokens (position 0 again)."""
        lib.af_llama_gen_reset(self.ptr)


class Sampler(Handle):
    """run.c's sampler (temperature, top-p, xorshift seed)."""
    _free = "af_llama_sampler_free"
    _kind = "sampler"

    def __init__(self, vocab_size, temperature=0.0, top_p=0.9, seed=1):
        p = lib.af_llama_sampler_new(int(vocab_size), float(temperature), float(top_p), int(seed))
        if not p:
            raise InvalidError(last_error())
        super().__init__(p)
        self.vocab = int(vocab_size)

    def sample(self, logits):
        """Draws the next token id from logits (temperature, top-p, the seeded RNG)."""
        a = np.ascontiguousarray(logits, np.float32)
        if a.size != self.vocab:
            raise InvalidError("sample(): %d logits for a vocab of %d" % (a.size, self.vocab))
        r = lib.af_llama_sample(self.ptr, a.ctypes.data)
        if r < 0:
            check(C["AF_ERR_NUMERIC"])
        return r


def generate(weights, tokens=(1,), steps=256, temperature=0.0, top_p=0.9, seed=1, tokenizer=None):
    """Streams the next tokens (ids, or text pieces with a tokenizer)."""
    prev = list(tokens)[-1] if tokens else 1
    for t in weights.generate(tokens, steps, temperature, top_p, seed):
        if tokenizer is None:
            yield t
        else:
            yield tokenizer.decode_piece(prev, t).decode("utf-8", "replace")
        prev = t


def net(weights, seq):
    """The trainable llama for af.Trainer (objective custom: mean per-token CE): samples
    are `seq` token ids, targets one-hot [seq * vocab] (see windows())."""
    n = lib.af_net_llama(weights.ptr, int(seq))
    if not n.forward:
        raise InvalidError(last_error())
    v = weights.config["vocab_size"]
    return BuiltinNet(n, (int(seq),), int(seq) * v, "custom", llama=weights)


def windows(tokens, seq, vocab, idx):
    """x [n, seq] ids and one-hot next-token targets [n, seq * vocab] for windows starting
    at idx."""
    tokens = np.asarray(tokens)
    idx = np.asarray(idx)
    x = np.stack([tokens[i:i + seq] for i in idx]).astype(np.float32)
    y = np.stack([tokens[i + 1:i + seq + 1] for i in idx])
    oh = np.zeros((len(idx), seq, vocab), np.float32)
    np.put_along_axis(oh, y[..., None].astype(np.int64), 1.0, axis=2)
    return x, oh.reshape(len(idx), seq * vocab)


def train(weights, tokens, seq=32, steps=100, batch=8, lr=1e-3, seed=1, callback=None, **opts):
    """Fine-tunes `weights` on a token array (next-token CE) with the trainer on the CPU
    (default) and returns new Weights holding the result. callback(step_info) per step."""
    from .train import Trainer
    cfg = weights.config
    if seq > cfg["seq_len"]:
        raise InvalidError("seq %d exceeds the model's seq_len %d" % (seq, cfg["seq_len"]))
    tokens = np.asarray(tokens)
    if len(tokens) < seq + 2:
        raise InvalidError("%d tokens cannot fill one window of %d" % (len(tokens), seq))
    opts.setdefault("precision", "fp32")
    t = Trainer(net(weights, seq), batch=batch, lr=lr, **opts)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        idx = rng.integers(0, len(tokens) - seq - 1, size=batch * t.batches_per_call)
        x, y = windows(tokens, seq, cfg["vocab_size"], idx)
        info = t.step(x, y)
        if callback is not None and callback(info):
            break
    out = Weights.new(cfg)
    for i, v in enumerate(t.params()):
        check(lib.af_llama_weights_set_param(out.ptr, i, v.ctypes.data))
    t.close()
    return out


def params(graph, weights):
    """The model's params created in `graph` from `weights` (af_llama_params_new), in
    llama2.c's order: token_embedding, rms_att[0..L-1], wq[..], ..., rms_final
    (, classifier); matrices [out, in]."""
    from .graph import Tensor
    c = _cconfig(weights.config)
    n = lib.af_llama_param_count(ctypes.byref(c))
    out = (ctypes.c_void_p * max(1, n))()
    got = lib.af_llama_params_new(graph.ptr, weights.ptr, out, n)
    if got != n:
        raise InvalidError(last_error() or graph.error)
    res = []
    for i in range(n):
        name = ctypes.c_char_p()
        check(lib.af_llama_param_at(ctypes.byref(c), i, None, None, ctypes.byref(name)))
        t = Tensor(graph, out[i], ("parameter", ctypes.string_at(lib.af_tensor_name(out[i])).decode(), None), ())
        res.append(t)
    return res


def forward(cfg, tokens, params):
    """Logits [B, T, vocab] for token ids `tokens` [B, T] (a Tensor of whole numbers) from
    the params of params() (af_llama): llama2.c's model.py as a graph, differentiable."""
    from .graph import Tensor
    from .errors import GraphError
    c = _cconfig(cfg)
    arr = (ctypes.c_void_p * max(1, len(params)))(*[p.ptr for p in params])
    if len(params) != lib.af_llama_param_count(ctypes.byref(c)):
        raise InvalidError("forward(): %d params; this config has %d" % (len(params), lib.af_llama_param_count(ctypes.byref(c))))
    r = lib.af_llama(ctypes.byref(c), tokens.ptr, arr)
    if not r:
        raise GraphError("llama.forward(): %s" % (last_error() or tokens.graph.error))
    return Tensor(tokens.graph, r, ("_llama", id(params)), (tokens,) + tuple(params))
