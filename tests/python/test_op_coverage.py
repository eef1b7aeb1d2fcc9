"""Every op of the library's op table that users build is a Python function (the op
table is read through af_op_info, so a new row without a builder or a documented reason
fails here), and the unary ops added for that (floor, atan, asin, acos, atanh) against
NumPy, with gradients against central finite differences of NumPy's functions."""
import numpy as np
import pytest

import aneforge as af
from aneforge import graph as _graph

NEW_UNARY = {
    # name: (NumPy function, input range, has a gradient)
    "floor": (np.floor, (-3.0, 3.0), False),
    "atan": (np.arctan, (-3.0, 3.0), True),
    "asin": (np.arcsin, (-0.9, 0.9), True),
    "acos": (np.arccos, (-0.9, 0.9), True),
    "atanh": (np.arctanh, (-0.9, 0.9), True),
}


def test_every_buildable_op_table_row_is_a_python_function():
    rows = af.op_info()
    assert len(rows) == len(af.op_table()) > 80
    missing = []
    for row in rows:
        name = row["name"]
        if row["leaf"]:
            continue  # input / const: Graph.input, Graph.const
        if name in af.OPS:
            assert callable(getattr(af, name)), name
            continue
        if name not in _graph.INTERNAL:  # the hand-kept list of rows only backward/llama make
            missing.append(name)
    assert not missing, ("op-table rows with no Python function: %s; add a public af_<op> builder "
                         "to include/aneforge.h (or list the row in aneforge.graph.INTERNAL with why)" % missing)
    for name, why in af.INTERNAL_OPS.items():
        assert "no public builder" not in why and "no Python conversion" not in why, (name, why)


def test_op_info_describes_a_row():
    info = {r["name"]: r for r in af.op_info()}
    assert info["atan"]["kind"] == "unary" and info["atan"]["arity"] == 1 and info["atan"]["ports"] == "x"
    assert info["input"]["leaf"] and not info["add"]["leaf"]
    assert af.op_info("atanh")["name"] == "atanh"
    with pytest.raises(af.InvalidError, match="no op 'nope'"):
        af.op_info("nope")


@pytest.mark.parametrize("name", sorted(NEW_UNARY))
def test_new_unary_op_matches_numpy(name, rng):
    npfn, (lo, hi), _ = NEW_UNARY[name]
    x = rng.uniform(lo, hi, (5, 7)).astype(np.float32)
    g = af.Graph()
    xi = g.input("x", x.shape)
    op = getattr(af, name)
    assert op.__doc__ and "(C: af_%s)" % name in op.__doc__
    y = op(xi)
    assert y.op == name and y.shape == x.shape
    assert callable(getattr(xi, name))  # also a Tensor method
    out = af.compile(y, [xi])(x=x)
    np.testing.assert_allclose(out, npfn(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(NEW_UNARY))
def test_new_unary_op_on_ane_sim_in_fp16(name, rng):
    npfn, (lo, hi), _ = NEW_UNARY[name]
    x = rng.uniform(lo, hi, (4, 8)).astype(np.float16)
    g = af.Graph()
    xi = g.input("x", x.shape, "fp16")
    out = af.compile(getattr(af, name)(xi), [xi], target="ane-sim:m1")(x=x)
    np.testing.assert_allclose(np.asarray(out, np.float64), npfn(x.astype(np.float64)), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("name", sorted(NEW_UNARY))
def test_new_unary_op_gradient_matches_finite_differences(name, rng):
    npfn, (lo, hi), has_grad = NEW_UNARY[name]
    x = rng.uniform(lo, hi, (3, 4)).astype(np.float32)
    if name == "floor":  # keep clear of the integers, where floor jumps
        x = np.floor(x) + 0.5
    R = rng.standard_normal(x.shape).astype(np.float32)
    g = af.Graph()
    p = g.parameter("p", x)
    loss = (getattr(af, name)(p) * g.const(R)).sum()
    grad = af.compile(af.backward(loss, [p])[p], [p])()
    h = 1e-6
    xd = x.astype(np.float64)
    fd = R * (npfn(xd + h) - npfn(xd - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-5)
    assert af.op_has_vjp(name)
    if not has_grad:
        assert not np.any(grad)


def test_new_unary_gradients_match_torch(rng):
    torch = pytest.importorskip("torch")
    fns = {"atan": torch.atan, "asin": torch.asin, "acos": torch.acos, "atanh": torch.atanh}
    for name, tfn in fns.items():
        x = rng.uniform(-0.9, 0.9, (2, 5)).astype(np.float32)
        g = af.Graph()
        p = g.parameter("p", x)
        grad = af.compile(af.backward(getattr(af, name)(p).sum(), [p])[p], [p])()
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        tfn(t).sum().backward()
        np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
