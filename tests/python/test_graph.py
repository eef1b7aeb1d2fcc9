"""Graphs, ops, operators and compile/run against NumPy (independent references)."""
import numpy as np
import pytest

import aneforge as af


def run(outputs, feeds, target="cpu", inputs=None):
    return af.compile(outputs, inputs, target=target)(**feeds)


def test_binary_and_scalar_operators_match_numpy(rng):
    g = af.Graph()
    a, b = g.input("a", (3, 4)), g.input("b", (3, 4))
    A, B = rng.standard_normal((3, 4)).astype(np.float32), rng.uniform(1, 2, (3, 4)).astype(np.float32)
    outs = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b, "adds": a + 2.5, "rsub": 1.0 - a,
            "muls": 3 * a, "rdiv": 2.0 / b, "neg": -a, "abs": abs(a), "sq": a ** 2, "gt": a > b, "lt": a < b}
    got = af.compile(outs, [a, b])(a=A, b=B)
    ref = {"add": A + B, "sub": A - B, "mul": A * B, "div": A / B, "adds": A + 2.5, "rsub": 1.0 - A, "muls": 3 * A,
           "rdiv": 2.0 / B, "neg": -A, "abs": np.abs(A), "sq": A ** 2, "gt": (A > B) * 1.0, "lt": (A < B) * 1.0}
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-6, atol=1e-6, err_msg=k)


def test_generated_unary_ops_match_numpy(rng):
    g = af.Graph()
    x = g.input("x", (2, 5))
    X = rng.uniform(0.1, 2.0, (2, 5)).astype(np.float32)
    fns = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh,
           "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0), "sin": np.sin,
           "cos": np.cos, "inverse": lambda v: 1 / v, "square": np.square, "silu": lambda v: v / (1 + np.exp(-v))}
    outs = {k: getattr(af, k)(x) for k in fns}
    got = af.compile(outs, [x])(x=X)
    for k, f in fns.items():
        np.testing.assert_allclose(got[k], f(X), rtol=2e-6, atol=1e-6, err_msg=k)
    # methods too
    assert x.relu().op == "relu" and x.exp().op == "exp"


def test_matmul_reduce_softmax_layout(rng):
    g = af.Graph()
    a, b = g.input("a", (2, 3, 4)), g.input("b", (4, 5))
    A, B = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    outs = [a @ b, a.sum(axis=-1), a.mean(axis=(1, 2), keepdims=True), a.softmax(-1), a.transpose(2, 0, 1),
            a.reshape(6, -1), a[1, 1:3, :2], af.concat([a, a], axis=1), af.matmul(a, a, transpose_b=True),
            a.max(axis=1), af.einsum("bij,jk->bik", a, b)]
    got = af.compile(outs, [a, b])(A, B)
    e = np.exp(A - A.max(-1, keepdims=True))
    ref = [A @ B, A.sum(-1), A.mean((1, 2), keepdims=True), e / e.sum(-1, keepdims=True), A.transpose(2, 0, 1),
           A.reshape(6, -1), A[1, 1:3, :2], np.concatenate([A, A], 1), A @ A.transpose(0, 2, 1), A.max(1),
           np.einsum("bij,jk->bik", A, B)]
    for i, (x, y) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5, err_msg=str(i))


def test_split_and_pools(rng):
    g = af.Graph()
    x = g.input("x", (1, 2, 4, 4))
    X = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    p1, p2 = af.split(x, 3, [1, 3])
    ap = af.avg_pool(x, 2, 2, 0)
    mp = af.max_pool(x, (2, 2), (2, 2), (0, 0))
    got = af.compile([p1, p2, ap, mp], [x])(X)
    np.testing.assert_array_equal(got[0], X[..., :1])
    np.testing.assert_array_equal(got[1], X[..., 1:])
    np.testing.assert_allclose(got[2], X.reshape(1, 2, 2, 2, 2, 2).mean((3, 5)), rtol=1e-6)
    np.testing.assert_array_equal(got[3], X.reshape(1, 2, 2, 2, 2, 2).max((3, 5)))


def test_parameters_feed_their_value_and_constants_bake(rng):
    g = af.Graph()
    x = g.input("x", (2, 3))
    W = rng.standard_normal((3, 2)).astype(np.float32)
    w = g.parameter("w", W)
    c = g.const(np.array([1.0, -1.0], np.float32))
    m = af.compile(x @ w + c, [x, w])
    X = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(m(x=X), X @ W + [1, -1], rtol=1e-6)
    w.value = 2 * W  # parameters are fed: the next run sees the new value without recompiling
    np.testing.assert_allclose(m(x=X), X @ (2 * W) + [1, -1], rtol=1e-6)
    assert w.is_parameter and not x.is_parameter and w.name == "w"
    np.testing.assert_array_equal(w.value, 2 * W)


def test_default_graph_and_module_level_leaves(rng):
    with af.Graph() as g:
        x = af.input("x", (2, 2))
        w = af.parameter(np.eye(2, dtype=np.float32))
        assert x.graph is g and w.graph is g
    assert af.default_graph() is not g


def test_buffers_without_copies_and_dtypes(rng):
    g = af.Graph()
    x = g.input("x", (4,))
    m = af.compile(x * 2.0, [x])
    np.testing.assert_array_equal(m(np.arange(4, dtype=np.float16)), [0, 2, 4, 6])  # fp16 buffer as is
    np.testing.assert_array_equal(m(np.arange(4, dtype=np.int32)), [0, 2, 4, 6])  # ints converted
    np.testing.assert_array_equal(m(memoryview(np.arange(4, dtype=np.float32))), [0, 2, 4, 6])
    out = np.empty(4, np.float32)
    r = m(np.ones(4, np.float32), out=[out])
    assert r is out and (out == 2).all()


def test_ane_sim_model_stats_and_fp16():
    g = af.Graph()
    x = g.input("x", (8, 16), "fp16")
    w = g.parameter("w", np.full((16, 4), 0.5, np.float32))
    m = af.compile((x @ w).relu(), [x, w], target="ane-sim:m1")
    y = m(x=np.ones((8, 16), np.float32))
    np.testing.assert_array_equal(y, np.full((8, 4), 8.0))
    s = m.stats
    assert s.dispatches == 1 and s.segments == 1 and s.engine_flops >= 2 * 8 * 16 * 4
    assert m.family == "A13"
    m.reset_stats()
    assert m.stats.dispatches == 0


def test_resident_state_binding():
    g = af.Graph()
    s = g.input("s", (3,))
    m = af.compile(s + 1.0, [s])
    m.bind_state("s", 0, np.zeros(3, np.float32))
    for _ in range(4):
        m()
    np.testing.assert_array_equal(m.read_state("s"), [4, 4, 4])


def test_bridge_ops_run_on_cpu(rng):
    g = af.Graph()
    x = g.input("x", (1, 4, 2, 2))
    X = rng.standard_normal((1, 4, 2, 2)).astype(np.float32)
    y = af.pixel_shuffle(x, 2, 2)
    got = af.compile(y, [x])(X)
    ref = X.reshape(1, 1, 2, 2, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(got, ref)
