"""Misuse across the API raises (aneforge.Error, TypeError, ValueError, IndexError) and
never crashes the interpreter: every call below would be a use-after-free, a NULL or an
out-of-bounds read if it reached C unchecked."""
import numpy as np
import pytest

import aneforge as af

OK = (af.Error, TypeError, ValueError, IndexError, OverflowError)


def raises(fn, *a, **k):
    with pytest.raises(OK):
        fn(*a, **k)


def test_op_arguments_of_every_wrong_kind():
    g = af.Graph()
    x = g.input("x", (2, 3, 4, 4))
    for name in af.ops():
        op = getattr(af, name)
        raises(op)                                   # nothing
        raises(op, None, None, None, None, None, None, None, None, None, None, None, None)
        raises(op, "x", 1, 2)                        # a string where a tensor goes
    raises(af.reduce_sum, x, [0] * 1000, 0)         # more axes than the rank
    raises(af.reshape, x, [-1, -1])
    raises(af.reshape, x, [1] * 9)                  # beyond AF_MAX_RANK
    raises(af.slice_by_size, x, [0, 0, 0, 0], [9, 9, 9, 9])
    raises(af.concat, [], 0)
    raises(af.split, x, 0, 0)
    raises(af.split, x, 9, 2)
    raises(x.__getitem__, (0, 0, 0, 0, 0))
    raises(x.__getitem__, 5)
    raises(x.__getitem__, slice(0, 4, 2))
    raises(g.input, "y", (2, -3))
    raises(g.input, "y", (1,) * 7)
    raises(g.parameter, "p", np.zeros((1,) * 7, np.float32))
    raises(g.conv_param, "c", np.zeros((3, 3), np.float32))
    raises(af.einsum, "ij,jk->ik", x)
    raises(af.einsum, "??", x, x)


def test_closed_and_foreign_objects():
    g = af.Graph()
    x = g.input("x", (4,))
    m = af.compile(x * 2.0, [x])
    m.close()
    for f in (lambda: m(np.ones(4)), lambda: m.stats, lambda: m.read_state(0), lambda: m.bind_state(0, 0)):
        raises(f)
    g2 = af.Graph()
    y = g2.input("y", (4,))
    raises(af.compile, [x * 1.0, y * 1.0])
    raises(af.compile, x * 1.0, [y])
    raises(af.backward, x.sum(), [y])
    g.close()
    raises(af.compile, x)
    raises(lambda: x + 1.0)
    raises(af.mse, x, x)
    tok = af.Tokenizer.byte_level()
    tok.close()
    raises(tok.encode, "a")
    raises(lambda: tok.vocab_size)


def test_model_feed_misuse():
    g = af.Graph()
    x = g.input("x", (2, 2))
    s = g.input("s", (2,))
    m = af.compile([x * 2.0, s + 1.0], [x, s])
    raises(m, np.ones(4), np.ones(2), np.ones(2))
    raises(m, x=np.ones(4), s=np.ones(3))
    raises(m, np.ones(4), x=np.ones(4))
    raises(m, np.ones(4), np.ones(2), out=[np.empty(4, np.float32), np.empty(2, np.float32)])  # wrong out shape
    raises(m, np.ones(4), np.ones(2), out=[np.empty((2, 2), np.float64), np.empty(2, np.float32)])
    raises(m.bind_state, 5, 0)
    raises(m.bind_state, "s", 7)
    raises(m.read_state, -1)
    raises(m.write_state, "s", np.ones(5))


def test_files_and_text_misuse(tmp_path):
    d = str(tmp_path)
    for f in (af.llama.load, af.Tokenizer.load, af.read_tokens, af.npy_read, af.mil.read):
        raises(f, d)                                  # a directory
        raises(f, str(tmp_path / "none"))
    (tmp_path / "z").write_bytes(b"")
    for f in (af.llama.load, af.Tokenizer.load, af.npy_read, af.mil.read):
        raises(f, str(tmp_path / "z"))
    tok = af.Tokenizer.byte_level()
    raises(tok.decode, [999999])
    raises(tok.decode_piece, -1, 10 ** 6)
    raises(tok.token, 10 ** 6)
    raises(af.Tokenizer.train, ["a"], 10)
    raises(af.llama.config, "nope", 10)
    raises(af.llama.config, "tiny", 259, dim=63)
    raises(af.llama.Sampler, 10, -1.0, 0.9, 1)
    raises(af.llama.Sampler, 10, 1.0, 0.9, 0)
    s = af.llama.Sampler(4, 0.0, 0.9, 1)
    raises(s.sample, np.ones(3))
    raises(s.sample, np.array([1, np.nan, 0, 0]))
    raises(af.Dataset.load, "imagenet")
    raises(af.npy_write, str(tmp_path / "no" / "dir" / "a.npy"), np.ones(2))


def test_trainer_misuse():
    g = af.Graph()
    x, t = g.input("x", (4, 3)), g.input("t", (4, 2))
    w = g.parameter("w", np.zeros((3, 2), np.float32))
    ce = af.softmax_cross_entropy(x @ w, t)
    raises(af.Trainer, ce, optimizer="rmsprop")
    raises(af.Trainer, ce, plan="warp")
    raises(af.Trainer, ce, target="tpu")
    raises(af.Trainer, ce, dataset=(np.ones((3, 3)), np.ones((3, 2))))   # fewer samples than a batch
    raises(af.Trainer, ce, dataset=(np.ones((8, 3)), np.ones((7, 2))))
    raises(af.Trainer, 42)
    raises(af.Trainer, x)                                                # a tensor that is no loss
    raises(af.UnrolledTrainer, [w], lambda P, xb: xb @ P[0], "ce")
    raises(af.Trainer, lambda P, xb: xb @ P[0], [x], sample=(3,), out_dim=2)  # x is no param
    tr = af.Trainer(ce, dataset=(np.ones((8, 3)), np.eye(2)[[0, 1] * 4]))
    raises(tr.resume, "/nonexistent/ck")
    raises(tr.predict, np.ones(5))
    raises(tr.step, np.ones((4, 3)), np.ones((4, 3)))
