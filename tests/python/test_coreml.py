"""af.coreml: export a graph or a built-in net as a Core ML package, read it back (load,
open), run it against NumPy, fine-tune its weights (params) and freeze them to export
again; bad paths and patterns raise with the library's message."""
import numpy as np
import pytest

import aneforge as af


def small(rng):
    g = af.Graph()
    x = g.input("x", (2, 3))
    W = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    y = (x @ g.const(W, "w") + g.const(b, "b")).relu()
    return g, x, y, W, b


def test_export_load_run_matches_numpy(tmp_path, rng):
    g, x, y, W, b = small(rng)
    path = af.coreml.export(y, [x], tmp_path / "m.mlpackage", author="tester", description="small")
    assert (tmp_path / "m.mlpackage" / "Manifest.json").exists()
    assert b"tester" in (tmp_path / "m.mlpackage" / "Data" / "com.apple.CoreML" / "model.mlmodel").read_bytes()
    p = af.coreml.load(path)
    assert [t.name for t in p.inputs] == ["x"] and p.inputs[0].shape == (2, 3) and len(p.outputs) == 1
    X = rng.standard_normal((2, 3)).astype(np.float32)
    ref = np.maximum(X @ W + b, 0)
    np.testing.assert_allclose(np.asarray(p.compile()(x=X), np.float32), ref, rtol=5e-3, atol=5e-3)  # fp16 package
    np.testing.assert_allclose(np.asarray(p.compile(target="ane-sim:m1")(x=X.astype(np.float16)), np.float32), ref,
                               rtol=1e-2, atol=1e-2)


def test_open_names_dtypes_and_close(tmp_path, rng):
    g, x, y, W, b = small(rng)
    af.coreml.export(y, [x], tmp_path / "m.mlpackage")
    X = rng.standard_normal((2, 3)).astype(np.float32)
    with af.coreml.open(tmp_path / "m.mlpackage") as q:
        assert q.input_names == ["x"] and q.input_dtypes == ["fp16"] and q.output_dtypes == ["fp16"]
        assert len(q.output_names) == 1 and q.output_names[0]
        m = q.compile()
    out = m(X)  # a model compiled from it outlives the program
    np.testing.assert_allclose(np.asarray(out, np.float32), np.maximum(X @ W + b, 0), rtol=5e-3, atol=5e-3)
    assert q.closed and q.graph.closed
    with pytest.raises(af.ClosedError, match="closed"):
        q.inputs[0].shape
    with pytest.raises(af.ClosedError, match="closed"):
        q.compile()


def test_params_gradient_and_freeze_export_again(tmp_path, rng):
    g, x, y, W, b = small(rng)
    af.coreml.export(y, [x], tmp_path / "m.mlpackage")
    p = af.coreml.load(tmp_path / "m.mlpackage")
    ps = af.coreml.params(p, "w*")
    assert [t.name for t in ps] == ["w"] and ps[0].is_parameter and ps[0].shape == (3, 4)
    np.testing.assert_allclose(ps[0].value, W, rtol=1e-3, atol=1e-3)  # fp16 weights, fp32 master
    X = rng.standard_normal((2, 3)).astype(np.float32)
    grad = af.compile([af.backward(p.outputs[0].sum(), ps)[ps[0]]], p.inputs + ps)(X, ps[0].value)
    mask = (X @ ps[0].value + b > 0).astype(np.float32)
    np.testing.assert_allclose(np.asarray(grad, np.float32), X.T @ mask, rtol=5e-3, atol=5e-3)
    W2 = rng.standard_normal((3, 4)).astype(np.float32)
    af.coreml.freeze(ps, [W2])
    assert not ps[0].is_parameter
    af.coreml.export(p.outputs, p.inputs, tmp_path / "m2.mlpackage")
    out = af.coreml.load(tmp_path / "m2.mlpackage").compile()(X)
    np.testing.assert_allclose(np.asarray(out, np.float32), np.maximum(X @ W2 + b, 0), rtol=1e-2, atol=1e-2)


def test_export_net_matches_numpy_and_trainer(tmp_path):
    net = af.nets.mlp(sample=(1, 2, 3), hidden=5, classes=4, seed=3)
    tr = af.Trainer(net, batch=2, threads=1, precision="fp32")
    P = tr.params()
    X = np.random.default_rng(2).standard_normal((2, 1, 2, 3)).astype(np.float32)
    x = X.reshape(2, -1)
    with pytest.raises(af.ClosedError, match="make the net again"):
        af.coreml.export_net(net, tmp_path / "gone.mlpackage", 2)
    net = af.nets.mlp(sample=(1, 2, 3), hidden=5, classes=4, seed=3)
    P2 = [2 * w for w in P]
    af.coreml.export_net(net, tmp_path / "n.mlpackage", 2, weights=P2)
    af.coreml.export_net(net, tmp_path / "n0.mlpackage", 2)
    p = af.coreml.load(tmp_path / "n.mlpackage")
    assert [t.name for t in p.inputs] == ["input"] and p.outputs[0].shape == (2, 4)
    ref2 = np.maximum(x @ P2[0].T + P2[1], 0) @ P2[2].T + P2[3]
    np.testing.assert_allclose(np.asarray(p.compile()(X), np.float32), ref2, rtol=1e-2, atol=1e-2)
    out0 = af.coreml.load(tmp_path / "n0.mlpackage").compile()(X)
    np.testing.assert_allclose(np.asarray(out0, np.float32), tr.predict(X), rtol=5e-3, atol=5e-3)


def test_bad_input_raises_the_library_message(tmp_path, rng):
    g, x, y, W, b = small(rng)
    with pytest.raises(af.IOError, match="cannot open"):
        af.coreml.load(tmp_path / "nope.mlpackage")
    with pytest.raises(af.IOError, match="cannot open"):
        af.coreml.open(tmp_path / "nope.mlpackage")
    af.coreml.export(y, [x], tmp_path / "m.mlpackage")
    with pytest.raises(af.IOError, match="already exists"):
        af.coreml.export(y, [x], tmp_path / "m.mlpackage")
    p = af.coreml.load(tmp_path / "m.mlpackage")
    with pytest.raises(af.InvalidError, match="no weight constant is named like 'zz\\*'"):
        af.coreml.params(p, "zz*")
    ps = af.coreml.params(p)
    with pytest.raises(af.InvalidError, match="values for"):
        af.coreml.freeze(ps, [])
    with pytest.raises(af.InvalidError, match="of shape"):
        af.coreml.freeze(ps, [np.zeros(5, np.float32)] * len(ps))
    with pytest.raises(af.InvalidError, match="Tensors"):
        af.coreml.export([1], [x], tmp_path / "z.mlpackage")
    (tmp_path / "bad.mlpackage").mkdir()
    (tmp_path / "bad.mlpackage" / "Manifest.json").write_text("{not json")
    with pytest.raises(af.Error):
        af.coreml.load(tmp_path / "bad.mlpackage")


def spec_version(pkg):
    """Model.specificationVersion: field 1, the first varint of model.mlmodel."""
    b = (pkg / "Data" / "com.apple.CoreML" / "model.mlmodel").read_bytes()
    assert b[0] == 0x08
    return b[1]


@pytest.mark.parametrize("ios", [15, 16, 17, 18])
@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_deployment_targets(tmp_path, rng, ios, precision):
    """Every target in both precisions: its specification version, the input dtype the
    target allows (iOS 15 has no fp16 features), and the same outputs as NumPy."""
    g, x, y, W, b = small(rng)
    pkg = tmp_path / "t.mlpackage"
    af.coreml.export(y, [x], pkg, ios=ios, precision=precision)
    assert spec_version(pkg) == ios - 9
    X = rng.standard_normal((2, 3)).astype(np.float32)
    with af.coreml.open(pkg) as q:
        io = "fp16" if precision == "fp16" and ios >= 16 else "fp32"
        assert q.input_dtypes == [io] and q.output_dtypes == [io]
        out = q.compile()(x=X)
    tol = 5e-3 if precision == "fp16" else 1e-5
    np.testing.assert_allclose(np.asarray(out, np.float32), np.maximum(X @ W + b, 0), rtol=tol, atol=tol)
    net = af.nets.mlp(sample=(3,), hidden=4, classes=2, seed=1)
    af.coreml.export_net(net, tmp_path / "n.mlpackage", 2, ios=ios, precision=precision)
    assert spec_version(tmp_path / "n.mlpackage") == ios - 9


def test_bad_target_or_precision_names_the_range(tmp_path, rng):
    g, x, y, W, b = small(rng)
    for bad in (14, 19, "18", True):
        with pytest.raises(af.InvalidError, match="the deployment target is 15, 16, 17 or 18"):
            af.coreml.export(y, [x], tmp_path / "b.mlpackage", ios=bad)
    with pytest.raises(af.InvalidError, match='precision=8: choose "fp16" or "fp32"'):
        af.coreml.export(y, [x], tmp_path / "b.mlpackage", precision=8)
    assert not (tmp_path / "b.mlpackage").exists()
