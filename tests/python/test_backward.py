"""af.backward: gradients against closed forms and finite differences; its options."""
import numpy as np
import pytest

import aneforge as af


def test_linear_relu_gradient_closed_form(rng):
    g = af.Graph()
    x = g.input("x", (5, 3))
    W0 = rng.standard_normal((3, 4)).astype(np.float32)
    w = g.parameter("w", W0)
    loss = ((x @ w).relu() * 0.5).sum()
    grads = af.backward(loss, [w])
    X = rng.standard_normal((5, 3)).astype(np.float32)
    got = af.compile(grads[w], [x, w])(x=X)
    ref = X.T @ (0.5 * ((X @ W0) > 0))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_cross_entropy_gradient_is_analytic_and_scaled(rng):
    g = af.Graph()
    x, t = g.input("x", (4, 3)), g.input("t", (4, 3))
    w = g.parameter("w", np.eye(3, dtype=np.float32))
    ce = af.softmax_cross_entropy(x @ w, t)
    gw = af.backward(ce, [w], loss_scale=8.0)[w]
    X = rng.standard_normal((4, 3)).astype(np.float32)
    T = np.eye(3, dtype=np.float32)[[0, 1, 2, 0]]
    got, lv = af.compile([gw, ce.value], [x, t, w])(X, T)
    p = np.exp(X - X.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(got, 8.0 * X.T @ (p - T) / 4, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lv.reshape(()), -np.log((p * T).sum(1)).mean(), rtol=1e-5)


def test_finite_differences_through_norm_and_softmax(rng):
    g = af.Graph()
    x = g.input("x", (2, 6))
    P0 = rng.standard_normal((6, 6)).astype(np.float32) * 0.5
    p = g.parameter("p", P0)
    y = af.layer_norm(x @ p).softmax(-1)
    loss = (y * y).sum()
    gp = af.backward(loss, [p])[p]
    X = rng.standard_normal((2, 6)).astype(np.float32)
    fwd = af.compile(loss, [x, p])
    got = af.compile(gp, [x, p])(x=X)

    def f(P):
        return float(np.asarray(fwd(X, P), np.float64).reshape(()))
    eps, num = 1e-2, np.zeros_like(P0)
    for i in range(6):
        for j in range(6):
            d = np.zeros_like(P0)
            d[i, j] = eps
            num[i, j] = (f(P0 + d) - f(P0 - d)) / (2 * eps)
    np.testing.assert_allclose(got, num, rtol=5e-2, atol=5e-3)


def test_stop_frontier_detaches():
    g = af.Graph()
    x = g.input("x", (2,))
    w = g.parameter("w", np.array([2.0, 3.0], np.float32))
    h = x * w
    y = (h * h).sum()
    # with h in the frontier, gradient reaches h but not w through it: zero for w
    gw = af.backward(y, [w], stop=[h])[w]
    got = af.compile(gw, [x, w])(x=np.ones(2, np.float32))
    np.testing.assert_array_equal(got, [0, 0])
    gw2 = af.backward(y, [w])[w]
    np.testing.assert_allclose(af.compile(gw2, [x, w])(x=np.ones(2, np.float32)), [4.0, 6.0])


def test_backward_refuses_non_scalar_loss():
    g = af.Graph()
    w = g.parameter("w", np.ones((2, 2), np.float32))
    with pytest.raises(af.GraphError, match="one element|scalar"):
        af.backward(w * 2.0, [w])
