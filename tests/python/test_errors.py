"""Misuse raises aneforge.Error subclasses carrying the library's message; nothing crashes."""
import gc

import numpy as np
import pytest

import aneforge as af


def test_builder_error_names_the_problem():
    g = af.Graph()
    a, b = g.input("a", (2, 3)), g.input("b", (4, 5))
    with pytest.raises(af.GraphError, match="add"):
        a + b
    with pytest.raises(af.GraphError, match="shape"):
        a @ b


def test_wrong_arity_and_lengths_raise_before_c():
    g = af.Graph()
    x = g.input("x", (2, 3, 4))
    with pytest.raises(af.InvalidError, match="perm has 2 entries; it needs 3"):
        af.transpose(x, (1, 0))
    with pytest.raises(af.InvalidError, match="begin has 1 entries"):
        af.slice_by_size(x, [0], [1])
    with pytest.raises(af.InvalidError, match="needs at least one Tensor"):
        af.softmax()
    with pytest.raises(af.InvalidError, match="int or a pair"):
        af.avg_pool(g.input("y", (1, 1, 4, 4)), (2, 2, 2), 1, 0)


def test_mixed_graphs_refused():
    a, b = af.Graph().input("a", (2,)), af.Graph().input("b", (2,))
    with pytest.raises(af.InvalidError, match="different graphs"):
        af.add(a, b)


def test_wrong_feed_shape_and_dtype():
    g = af.Graph()
    x = g.input("x", (2, 3))
    m = af.compile(x * 2.0, [x])
    with pytest.raises(af.InvalidError, match="5 elements given, the compiled shape holds 6"):
        m(np.ones(5, np.float32))
    with pytest.raises(af.InvalidError, match="not numeric"):
        m(np.array(["a"] * 6))
    with pytest.raises(af.InvalidError, match="no input named 'y'"):
        m(y=np.ones(6))
    with pytest.raises(af.InvalidError, match="'x' was not given"):
        m()
    with pytest.raises(af.InvalidError, match="dtype"):
        g.input("z", (2,), "int8")


def test_closed_objects_raise():
    g = af.Graph()
    x = g.input("x", (2,))
    m = af.compile(x + 1.0, [x])
    g.close()
    with pytest.raises(af.ClosedError):
        x.relu()
    with pytest.raises(af.ClosedError):
        x.shape
    np.testing.assert_array_equal(m(np.zeros(2, np.float32)), [1, 1])  # the model keeps its graph
    m.close()
    m.close()  # twice is fine
    with pytest.raises(af.ClosedError, match="model was closed"):
        m(np.zeros(2, np.float32))
    with pytest.raises(af.ClosedError):
        m.stats


def test_compile_errors_carry_the_walls_message():
    g = af.Graph()
    x = g.input("x", (4, 3))  # fp32 input on an engine target
    with pytest.raises(af.CompileError, match="fp16"):
        af.compile(x.relu(), [x], target="ane-sim:m1")
    with pytest.raises(af.InvalidError):
        af.compile(x.relu(), [x], target="gpu")
    with pytest.raises(af.CompileError, match="input"):
        af.compile(x.relu(), [])  # x not listed


def test_io_errors_have_status_classes(tmp_path):
    with pytest.raises(af.IOError):
        af.npy_read(str(tmp_path / "missing.npy"))
    bad = tmp_path / "bad.npy"
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }"
    header += b" " * (117 - len(header)) + b"\n"
    bad.write_bytes(b"\x93NUMPY\x01\x00" + bytes([len(header), 0]) + header + b"\0" * 8)  # 2 of 10 floats
    with pytest.raises(af.CorruptError):
        af.npy_read(str(bad))
    assert issubclass(af.IOError, OSError) and issubclass(af.ShapeError, af.Error)


def test_tensor_keeps_graph_alive_after_python_drops_it():
    def make():
        g = af.Graph()
        return g.input("x", (3,))
    x = make()
    gc.collect()
    y = x * 3.0  # the tensor holds its Graph object: still valid
    np.testing.assert_array_equal(af.compile(y, [x])(np.ones(3, np.float32)), [3, 3, 3])
