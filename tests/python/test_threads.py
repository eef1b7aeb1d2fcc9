"""Threads: calls release the GIL (ctypes CDLL), models run from several threads at once
as the header allows, and a trainer's callback tensors die with its construction."""
import ctypes
import threading

import numpy as np
import pytest

import aneforge as af
from aneforge import _lib


def test_library_calls_release_the_gil():
    # CDLL functions drop the GIL around the call; PyDLL ones (FUNCFLAG_PYTHONAPI) keep it.
    assert not isinstance(_lib.lib, ctypes.PyDLL)
    assert not _lib.lib.af_run._flags_ & ctypes._FUNCFLAG_PYTHONAPI
    assert not _lib.lib.af_trainer_step._flags_ & ctypes._FUNCFLAG_PYTHONAPI


def test_models_run_from_many_threads(rng):
    g = af.Graph()
    x = g.input("x", (64, 64))
    W = rng.standard_normal((64, 64)).astype(np.float32) * 0.1
    w = g.parameter("w", W)
    y = (x @ w).tanh() @ w
    shared = af.compile(y, [x, w], threads=1)
    own = [af.compile(y, [x, w], threads=1) for _ in range(3)]
    X = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(6)]
    ref = [np.tanh(a @ W) @ W for a in X]
    errors = []

    def work(m, k):
        try:
            for _ in range(20):
                for a, r in zip(X, ref):
                    np.testing.assert_allclose(m(x=a), r, rtol=1e-4, atol=1e-5)
        except Exception as e:  # reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(m, i)) for i, m in enumerate(own + [shared, shared])]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_tensors_kept_from_a_trainer_callback_raise_afterwards():
    g = af.Graph()
    w = g.parameter("w", np.ones((4, 2), np.float32))
    kept = []

    def fwd(P, x):
        kept.append(x)
        return x @ P[0]
    tr = af.Trainer(fwd, [w], sample=(4,), out_dim=2, batch=2)
    assert kept
    with pytest.raises(af.ClosedError):
        kept[0].relu()  # the trainer's graph is not the user's to build on
    tr.step(np.ones((2, 4), np.float32), np.eye(2, dtype=np.float32))
