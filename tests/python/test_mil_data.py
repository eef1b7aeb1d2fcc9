"""MIL emit/read/run, datasets and .npy files from Python, and leaks over repeated
compile/run/free loops."""
import gc
import os
import struct

import numpy as np
import pytest

import aneforge as af


def test_mil_emit_read_run_round_trip(tmp_path, rng):
    g = af.Graph()
    x = g.input("x", (2, 8), "fp16")
    W = (rng.standard_normal((8, 4)) * 0.5).astype(np.float32)
    w = g.const(W, "w")
    y = af.softmax((x @ w).relu(), -1)
    path = af.mil.emit(y, [x], tmp_path / "prog")
    text = open(path).read()
    assert text.startswith("program(1.3)") and "softmax" in text
    assert os.path.exists(tmp_path / "prog" / "weights" / "weight.bin")
    prog = af.mil.read(path)
    assert [t.name for t in prog.inputs] == ["x"] and len(prog.outputs) == 1
    X = rng.standard_normal((2, 8)).astype(np.float32)
    ref = af.compile(y, [x])(X)
    got = prog.compile()(X)
    np.testing.assert_allclose(got, ref, atol=2e-3)  # the MIL holds fp16 weights
    np.testing.assert_allclose(af.mil.run(path, x=X, target="ane-sim:m5"), ref, atol=5e-3)


def test_mil_read_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.mil"
    p.write_text("program(1.3)\n{\n  func main<ios18>(tensor<fp16, [2]> x) {\n    tensor<fp16, [2]> y = nonsense(x = x);\n"
                 "  } -> (y);\n}\n")
    with pytest.raises(af.Error, match="line 4|4:"):
        af.mil.read(str(p))


def test_datasets_from_idx_files(tmp_path):
    imgs = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
    (tmp_path / "i").write_bytes(struct.pack(">IIII", 0x803, 3, 4, 5) + imgs.tobytes())
    (tmp_path / "l").write_bytes(struct.pack(">II", 0x801, 3) + bytes([2, 0, 9]))
    d = af.Dataset.from_idx(str(tmp_path / "i"), str(tmp_path / "l"))
    assert len(d) == 3 and d.sample_shape == (1, 4, 5) and d.classes == 10
    x, y = d.batch([2, 0])
    np.testing.assert_allclose(x[:, 0], imgs[[2, 0]] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y.argmax(1), [9, 2])
    np.testing.assert_array_equal(d.labels, [2, 0, 9])
    with pytest.raises(af.Error, match="fetch|mnist"):
        af.Dataset.load("mnist", str(tmp_path))
    with pytest.raises(af.InvalidError):
        d.batch([5])


def test_npy_round_trip(tmp_path, rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    af.npy_write(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), a)  # NumPy reads ours
    np.save(tmp_path / "b.npy", a.astype(np.float16))
    np.testing.assert_array_equal(af.npy_read(tmp_path / "b.npy"), a.astype(np.float16).astype(np.float32))


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_repeated_build_compile_run_free_does_not_leak(rng):
    X = rng.standard_normal((16, 64)).astype(np.float32)
    W = rng.standard_normal((64, 64)).astype(np.float32)

    def once():
        g = af.Graph()
        x = g.input("x", (16, 64))
        w = g.parameter("w", W)
        y = ((x @ w).relu() @ w).softmax(-1)
        gw = af.backward(y.sum(), [w])[w]
        m = af.compile([y, gw], [x, w])
        m(x=X)
        m.close()
        g.close()
    for _ in range(30):  # warm up allocator pools
        once()
    gc.collect()
    before = _rss_kb()
    for _ in range(300):
        once()
    gc.collect()
    grown = _rss_kb() - before
    assert grown < 4096, "RSS grew %d kB over 300 build/compile/run/free loops" % grown


def test_objects_are_freed_when_python_drops_them(rng):
    import weakref
    g = af.Graph()
    x = g.input("x", (4,))
    m = af.compile(x * 2.0, [x])
    r = weakref.ref(m)
    del m
    gc.collect()
    assert r() is None  # nothing in the package keeps a model alive
    tr = af.Trainer(lambda P, xb: xb @ P[0], [g.parameter("w", np.ones((4, 2), np.float32))], sample=(4,), out_dim=2,
                    batch=2)
    rt = weakref.ref(tr)
    del tr
    gc.collect()
    assert rt() is None
