"""Gradients against PyTorch (float64 autograd) for the ops and a small MLP and CNN.
Skipped where torch is not installed (pip install torch)."""
import numpy as np
import pytest

import aneforge as af

torch = pytest.importorskip("torch")
F = torch.nn.functional


def grads_af(build, arrays, seed_shape_rng):
    """Loss = sum(out * R) for a fixed random R; returns (out, [dL/d array])."""
    g = af.Graph()
    ps = [g.parameter("p%d" % i, a) for i, a in enumerate(arrays)]
    out = build(*ps)
    R = seed_shape_rng.standard_normal(out.shape).astype(np.float32)
    loss = (out * g.const(R)).sum()
    gr = af.backward(loss, ps)
    res = af.compile([out] + [gr[p] for p in ps], ps)()
    res = res if isinstance(res, tuple) else (res,)
    return res[0], list(res[1:]), R


def grads_torch(fn, arrays, R):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out = fn(*ts)
    (out * torch.tensor(R, dtype=torch.float64)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


U = lambda r, *s: r.uniform(0.5, 2.0, s).astype(np.float32)  # noqa: E731
N = lambda r, *s: r.standard_normal(s).astype(np.float32)  # noqa: E731

CASES = {
    "exp": (lambda x: af.exp(x), torch.exp, [N], (3, 4)),
    "log": (lambda x: af.log(x), torch.log, [U], (3, 4)),
    "sqrt": (lambda x: af.sqrt(x), torch.sqrt, [U], (3, 4)),
    "rsqrt": (lambda x: af.rsqrt(x), torch.rsqrt, [U], (3, 4)),
    "inverse": (lambda x: af.inverse(x), lambda x: 1 / x, [U], (3, 4)),
    "tanh": (lambda x: af.tanh(x), torch.tanh, [N], (3, 4)),
    "sigmoid": (lambda x: af.sigmoid(x), torch.sigmoid, [N], (3, 4)),
    "relu": (lambda x: af.relu(x), torch.relu, [N], (3, 4)),
    "gelu": (lambda x: af.gelu(x), F.gelu, [N], (3, 4)),
    "gelu_tanh": (lambda x: af.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"), [N], (3, 4)),
    "silu": (lambda x: af.silu(x), F.silu, [N], (3, 4)),
    "sin": (lambda x: af.sin(x), torch.sin, [N], (3, 4)),
    "cos": (lambda x: af.cos(x), torch.cos, [N], (3, 4)),
    "erf": (lambda x: af.erf(x), torch.erf, [N], (3, 4)),
    "abs": (lambda x: abs(x), torch.abs, [N], (3, 4)),
    "square": (lambda x: af.square(x), torch.square, [N], (3, 4)),
    "add": (lambda a, b: a + b, lambda a, b: a + b, [N, N], (3, 4)),
    "mul_bcast": (lambda a, b: a * b[0], lambda a, b: a * b[0], [N, N], (3, 4)),
    "div": (lambda a, b: a / b, lambda a, b: a / b, [N, U], (3, 4)),
    "pow": (lambda a, b: af.pow(a, b), torch.pow, [U, N], (3, 4)),
    "maximum": (lambda a, b: af.maximum(a, b), torch.maximum, [N, N], (3, 4)),
    "minimum": (lambda a, b: af.minimum(a, b), torch.minimum, [N, N], (3, 4)),
    "matmul": (lambda a, b: a @ b.transpose(), lambda a, b: a @ b.T, [N, N], (3, 4)),
    "softmax": (lambda x: x.softmax(-1), lambda x: torch.softmax(x, -1), [N], (3, 5)),
    "reduce_mean": (lambda x: x.mean(axis=0), lambda x: x.mean(0), [N], (3, 4)),
    "reduce_max": (lambda x: x.max(axis=1), lambda x: x.max(1).values, [N], (3, 4)),
    "layer_norm": (lambda x: af.layer_norm(x), lambda x: F.layer_norm(x, (x.shape[-1],), eps=1e-5), [N], (3, 6)),
    "rms_norm": (lambda x: af.rms_norm(x), lambda x: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5), [N], (3, 6)),
    "transpose_slice": (lambda x: x.transpose()[1:3, :2], lambda x: x.T[1:3, :2], [N], (3, 4)),
    "concat": (lambda a, b: af.concat([a, b], axis=0), lambda a, b: torch.cat([a, b], 0), [N, N], (3, 4)),
    "avg_pool": (lambda x: af.avg_pool(x, 2, 2, 0), lambda x: F.avg_pool2d(x, 2, 2), [N], (1, 2, 4, 4)),
    "max_pool": (lambda x: af.max_pool(x, 2, 2, 0), lambda x: F.max_pool2d(x, 2, 2), [N], (1, 2, 4, 4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_gradient_matches_torch(name, rng):
    build, tfn, gens, shape = CASES[name]
    arrays = [gen(rng, *shape) for gen in gens]
    out, ga, R = grads_af(build, arrays, rng)
    tout, gt = grads_torch(tfn, arrays, R)
    np.testing.assert_allclose(out, tout, rtol=1e-4, atol=1e-5)
    for a, b in zip(ga, gt):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=name)


def test_mlp_gradients_match_torch(rng):
    X, T = N(rng, 8, 6), np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    W1, B1, W2 = N(rng, 6, 5) * 0.5, N(rng, 5), N(rng, 5, 3) * 0.5
    g = af.Graph()
    x, t = g.input("x", X.shape), g.input("t", T.shape)
    ps = [g.parameter(n, v) for n, v in (("w1", W1), ("b1", B1), ("w2", W2))]
    logits = af.tanh(x @ ps[0] + ps[1]) @ ps[2]
    ce = af.softmax_cross_entropy(logits, t)
    gr = af.backward(ce, ps)
    got = af.compile([ce.value] + [gr[p] for p in ps], [x, t] + ps)(x=X, t=T)
    tw = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (W1, B1, W2)]
    tl = torch.tanh(torch.tensor(X, dtype=torch.float64) @ tw[0] + tw[1]) @ tw[2]
    loss = F.cross_entropy(tl, torch.tensor(T.argmax(1)))
    loss.backward()
    np.testing.assert_allclose(got[0].reshape(()), loss.item(), rtol=1e-5)
    for a, b in zip(got[1:], tw):
        np.testing.assert_allclose(a, b.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("target", ["portable", "cpu"])
def test_cnn_gradients_match_torch(rng, target):
    X = N(rng, 2, 2, 6, 6)
    T = np.eye(4, dtype=np.float32)[[1, 3]]
    Wc = N(rng, 3, 2, 3, 3) * 0.3   # PyTorch layout [Cout, Cin, kH, kW]
    Wl = N(rng, 27, 4) * 0.2
    g = af.Graph()
    if target == "cpu":
        g.set_target("cpu")  # the native conv node and its gradient kernels
    x, t = g.input("x", X.shape), g.input("t", T.shape)
    wc = g.conv_param("wc", Wc)
    wl = g.parameter("wl", Wl)
    h = af.avg_pool(af.conv2d(x, wc, 1, 1).relu(), 2, 2, 0)  # [2, 3, 3, 3]
    logits = h.reshape(2, 27) @ wl
    ce = af.softmax_cross_entropy(logits, t)
    gr = af.backward(ce, [wc, wl])
    got = af.compile([ce.value, gr[wc], gr[wl]], [x, t, wc, wl])(x=X, t=T)
    twc = torch.tensor(Wc, dtype=torch.float64, requires_grad=True)
    twl = torch.tensor(Wl, dtype=torch.float64, requires_grad=True)
    th = F.avg_pool2d(F.relu(F.conv2d(torch.tensor(X, dtype=torch.float64), twc, padding=1)), 2)
    loss = F.cross_entropy(th.reshape(2, 27) @ twl, torch.tensor([1, 3]))
    loss.backward()
    np.testing.assert_allclose(got[0].reshape(()), loss.item(), rtol=1e-5)
    # the conv weight's gradient comes back as the patch matrix [Cin*kH*kW, Cout]
    ref_wc = twc.grad.numpy().reshape(3, 18).T
    np.testing.assert_allclose(got[1], ref_wc, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[2], twl.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_llama_gradients_match_torch():
    """af.llama.forward's loss gradients (every weight) against the same model in torch."""
    from test_llama import tiny
    w = tiny(11)
    cfg = w.config
    B, T, V = 2, 6, cfg["vocab_size"]
    r = np.random.default_rng(2)
    toks = r.integers(3, V, (B, T + 1))
    g = af.Graph()
    ids, onehot = g.input("ids", (B, T)), g.input("t", (B * T, V))
    ps = af.llama.params(g, w)
    logits = af.llama.forward(cfg, ids, ps).reshape(B * T, V)
    ce = af.softmax_cross_entropy(logits, onehot)
    gr = af.backward(ce, ps)
    OH = np.eye(V, dtype=np.float32)[toks[:, 1:].reshape(-1)]
    got = af.compile([ce.value] + [gr[p] for p in ps], [ids, onehot] + ps)(ids=toks[:, :T].astype(np.float32), t=OH)

    D, H, KV, L = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["n_layers"]
    hs = D // H
    names = ["token_embedding"] + [n for n in ("rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3")
                                   for _ in range(L)] + ["rms_final"]
    layers = [0] + [l for _ in range(9) for l in range(L)] + [0]
    tw = [torch.tensor(w.tensor(n, l).reshape(p.shape), dtype=torch.float64, requires_grad=True)
          for n, l, p in zip(names, layers, ps)]
    P = {(n, l): t for n, l, t in zip(names, layers, tw)}

    def rms(x, g_):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g_.reshape(-1)
    i = torch.arange(0, hs, 2, dtype=torch.float64)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * (1.0 / 10000 ** (i / hs))
    cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]

    def rope(v, heads):
        v = v.reshape(B, T, heads, hs // 2, 2)
        a, b = v[..., 0], v[..., 1]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).reshape(B, T, heads, hs)
    x = P[("token_embedding", 0)][torch.tensor(toks[:, :T])]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        xb = rms(x, P[("rms_att", l)])
        q = rope(xb @ P[("wq", l)].T, H)
        k = rope(xb @ P[("wk", l)].T, KV).repeat_interleave(H // KV, 2)
        v = (xb @ P[("wv", l)].T).reshape(B, T, KV, hs).repeat_interleave(H // KV, 2)
        s = torch.einsum("bthd,buhd->bhtu", q, k) / hs ** 0.5
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), -1)
        x = x + torch.einsum("bhtu,buhd->bthd", a, v).reshape(B, T, D) @ P[("wo", l)].T
        xb = rms(x, P[("rms_ffn", l)])
        x = x + (F.silu(xb @ P[("w1", l)].T) * (xb @ P[("w3", l)].T)) @ P[("w2", l)].T
    lg = rms(x, P[("rms_final", 0)]) @ P[("token_embedding", 0)].T
    loss = F.cross_entropy(lg.reshape(B * T, V), torch.tensor(toks[:, 1:].reshape(-1)))
    loss.backward()
    np.testing.assert_allclose(got[0].reshape(()), loss.item(), rtol=1e-5)
    for name, a, t in zip(names, got[1:], tw):
        np.testing.assert_allclose(a, t.grad.numpy().reshape(a.shape), rtol=2e-3, atol=2e-6, err_msg=name)
