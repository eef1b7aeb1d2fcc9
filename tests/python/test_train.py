"""Trainer and UnrolledTrainer: seed 000's options, data order, checkpoints, progress,
and a Python MNIST-style run against the CLI's for the same seed and options."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import aneforge as af
from aneforge.train import _shuffle
from synth import write_mnist


def blobs(n=512, seed=0):
    r = np.random.default_rng(seed)
    X = r.standard_normal((n, 8)).astype(np.float32)
    lab = (X[:, 0] + X[:, 1] > 0).astype(int)
    return X, np.eye(2, dtype=np.float32)[lab], lab


def mlp_graph(batch=32, seed=3):
    r = np.random.default_rng(seed)
    g = af.Graph()
    x, t = g.input("x", (batch, 8)), g.input("t", (batch, 2))
    w1 = g.parameter("w1", (r.standard_normal((8, 16)) * 0.3).astype(np.float32))
    b1 = g.parameter("b1", np.zeros(16, np.float32))
    w2 = g.parameter("w2", (r.standard_normal((16, 2)) * 0.3).astype(np.float32))
    logits = (x @ w1 + b1).relu() @ w2
    return g, x, t, [w1, b1, w2], logits


def fwd(P, x):
    return (x @ P[0] + P[1]).relu() @ P[2]


def test_shuffle_is_the_clis_splitmix_fisher_yates():
    def ref(n, s):  # tools/cmd_train.c's loop, one step at a time
        perm = list(range(n))
        for i in range(n - 1, 0, -1):
            s = (s + 0x9E3779B97F4A7C15) & (2 ** 64 - 1)
            z = s
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2 ** 64 - 1)
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2 ** 64 - 1)
            z ^= z >> 31
            j = z % (i + 1)
            perm[i], perm[j] = perm[j], perm[i]
        return perm, s
    for n, s in ((1, 5), (2, 9), (1000, 1 * 0x2545F4914F6CDD1D + 1), (777, 2 ** 63 + 11)):
        p, st = _shuffle(n, s)
        rp, rs = ref(n, s)
        assert p.tolist() == rp and (st == rs or n < 2)


@pytest.mark.parametrize("opts", [dict(), dict(device_optimizer=True), dict(device_optimizer=True, resident=True),
                                  dict(optimizer="sgd", lr=0.2)])
def test_seed000_trainer_from_the_loss_as_built(opts):
    X, Y, lab = blobs()
    g, x, t, params, logits = mlp_graph()
    opts.setdefault("lr", 1e-2)
    tr = af.Trainer(af.softmax_cross_entropy(logits, t), optimizer=opts.pop("optimizer", "adam"), dataset=(X, Y), **opts)
    assert tr.batch == 32 and tr.num_params == 3
    tr.fit(epochs=4)
    assert tr.accuracy(X, lab) > 0.95
    assert tr.loss() < 0.3 and tr.last.step == 4 * 16
    tr.sync()  # trained values back in the graph's params: the user's model sees them
    m = af.compile(logits, [x] + params)
    assert (m(x=X[:32]).argmax(1) == lab[:32]).mean() > 0.9


def test_trainer_on_ane_sim_resident_plan():
    X, Y, lab = blobs()
    g, x, t, params, logits = mlp_graph()
    tr = af.Trainer(af.softmax_cross_entropy(logits, t), dataset=(X, Y), lr=1e-2, device_optimizer=True, resident=True,
                    target="ane-sim:m1", sim_engine=af.SimEngine())
    assert tr.plan == "resident"
    info = tr.fit(epochs=3)
    assert info.metric_source == "graph_fp16" and info.loss_scale == 128
    assert tr.accuracy(X, lab) > 0.9


def test_unrolled_trainer_k_steps_per_call():
    X, Y, lab = blobs()
    g, x, t, params, logits = mlp_graph()
    xs = [g.input("x%d" % i, (32, 8)) for i in range(4)]
    ts = [g.input("t%d" % i, (32, 2)) for i in range(4)]
    ut = af.UnrolledTrainer(params, fwd, "ce", xs, ts, (X, Y), resident=True, lr=1e-2)
    assert ut.plan == "unrolled" and ut.steps_per_call == 4 and ut.K == 4
    info = ut.step()
    assert info.step == 4
    sim = af.UnrolledTrainer(params, fwd, "ce", xs, ts, (X, Y), lr=1e-2, target="ane-sim:m5", sim_engine=af.SimEngine())
    assert sim.step().stats.dispatches == 1  # K steps in one dispatch
    ut.fit(epochs=3)
    assert ut.accuracy(X, lab) > 0.95
    shut = af.UnrolledTrainer(params, fwd, "ce", xs, ts, (X, Y), resident=False, lr=1e-2)
    assert shut.options.c.shuttle_state == 1


def test_mse_and_custom_losses():
    r = np.random.default_rng(5)
    X = r.standard_normal((256, 4)).astype(np.float32)
    Wt = r.standard_normal((4, 1)).astype(np.float32)
    Y = X @ Wt
    g = af.Graph()
    x, y = g.input("x", (32, 4)), g.input("y", (32, 1))
    w = g.parameter("w", np.zeros((4, 1), np.float32))
    pred = x @ w
    tr = af.Trainer(af.mse(pred, y), dataset=(X, Y), lr=5e-2)
    tr.fit(epochs=20)
    np.testing.assert_allclose(tr.params()[0], Wt, atol=2e-2)
    # a scalar loss built from any ops: mean |pred - y| (custom objective)
    l1 = abs(pred - y).mean()
    tr2 = af.Trainer(l1, output=pred, dataset=(X, Y), lr=5e-2)
    tr2.fit(epochs=20)
    np.testing.assert_allclose(tr2.params()[0], Wt, atol=5e-2)


def test_checkpoint_resume_is_bit_identical(tmp_path):
    X, Y, _ = blobs()
    g, x, t, params, logits = mlp_graph()
    ce = af.softmax_cross_entropy(logits, t)
    a = af.Trainer(ce, dataset=(X, Y), lr=1e-2, schedule="cosine", total_steps=64, seed=4)
    for _ in range(20):  # into the second epoch (16 calls per epoch)
        a.step()
    a.save(tmp_path / "ck")
    for _ in range(30):
        a.step()
    b = af.Trainer(ce, dataset=(X, Y), lr=1e-2, schedule="cosine", total_steps=64, seed=4)
    b.resume(tmp_path / "ck")
    for _ in range(30):
        b.step()
    for pa, pb in zip(a.params(), b.params()):
        assert pa.tobytes() == pb.tobytes()
    assert a.last.loss == b.last.loss and a.last.step == b.last.step
    with pytest.raises(af.Error):
        b.resume(tmp_path / "missing")


def test_progress_callback_and_iterator():
    X, Y, _ = blobs()
    g, x, t, params, logits = mlp_graph()
    tr = af.Trainer(af.softmax_cross_entropy(logits, t), dataset=(X, Y), lr=1e-2)
    seen = []
    tr.fit(epochs=1, callback=lambda i: seen.append(i.step))
    assert seen == list(range(1, 17))
    steps = [i.step for i in tr.iter(epochs=1)]
    assert steps == list(range(17, 33)) and tr.epoch == 2
    stopped = []
    tr.fit(epochs=5, callback=lambda i: stopped.append(i) or len(stopped) == 3)
    assert len(stopped) == 3


def test_callback_errors_surface_and_nothing_crashes():
    X, Y, _ = blobs()
    g, x, t, params, logits = mlp_graph()

    def bad(P, xb):
        raise RuntimeError("boom in forward")
    with pytest.raises(RuntimeError, match="boom in forward"):
        af.Trainer(bad, params, sample=(8,), out_dim=2, dataset=(X, Y))
    with pytest.raises(af.InvalidError, match="must return a Tensor"):
        af.Trainer(lambda P, xb: 3, params, sample=(8,), out_dim=2)
    tr = af.Trainer(fwd, params, sample=(8,), out_dim=2, batch=32)
    with pytest.raises(af.InvalidError, match="this trainer takes 32 samples"):
        tr.step(np.ones((3, 8), np.float32), np.ones((3, 2), np.float32))
    with pytest.raises(af.InvalidError, match="needs dataset"):
        tr.step()
    tr.close()
    with pytest.raises(af.ClosedError):
        tr.step(np.ones((32, 8)), np.ones((32, 2)))
    with pytest.raises(af.InvalidError, match="unknown training option 'lr_typo'"):
        af.Trainer(fwd, params, sample=(8,), out_dim=2, lr_typo=1)


def _cli():
    c = os.environ.get("AF_CLI") or shutil.which("aneforge")
    if not c:
        pytest.skip("the aneforge CLI is not at hand (AF_CLI unset, none on PATH)")
    return c


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_python_mnist_run_matches_the_cli(tmp_path, model):
    """Same nets, seed, options and data order: the same test accuracy and train loss."""
    cli = _cli()
    root = write_mnist(str(tmp_path), ntrain=640 if model == "cnn" else 1280)
    epochs, seed = 2, 3
    out = subprocess.run([cli, "train", model, "--data", "mnist", "--epochs", str(epochs), "--seed", str(seed), "--json",
                          "--threads", "1"], env=dict(os.environ, ANEFORGE_DATA=root), capture_output=True, text=True,
                         check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    train, test = af.Dataset.load("mnist", root, True), af.Dataset.load("mnist", root, False)
    X, Y = train.arrays()
    Xt, _ = test.arrays()
    norm = af.data.NORM["mnist"]
    net = af.nets.mlp(train.sample_shape, 128, 10, seed, norm) if model == "mlp" else \
        af.nets.cnn(train.sample_shape, 10, seed, norm)
    calls = len(X) // 64
    tr = af.Trainer(net, dataset=(X, Y), seed=seed, batch=64, lr=3e-3, schedule="cosine", weight_decay=0.05,
                    total_steps=calls * epochs, threads=1)
    ema = []  # the CLI's smoothed train loss (keep 0.95 per step)

    def track(info):
        ema.append(info.loss if not ema else 0.95 * ema[-1] + 0.05 * info.loss)
    tr.fit(epochs=epochs, callback=track)
    acc = tr.accuracy(Xt, test.labels)
    assert round(acc, 4) == res["test_acc"] and acc > 0.5
    assert "%.6f" % ema[-1] == "%.6f" % res["train_loss"]  # same data order, same steps


def test_batch_dependent_shapes_get_a_remedy():
    X, Y, _ = blobs()
    g = af.Graph()
    x, t = g.input("x", (32, 2, 4)), g.input("t", (32, 2))
    w = g.parameter("w", np.zeros((8, 2), np.float32))
    ce = af.softmax_cross_entropy(x.reshape(32, 8) @ w, t)  # 32 baked in: the eval program's batch differs
    with pytest.raises(af.GraphError, match=r"with -1, e.g."):
        af.Trainer(ce, dataset=(X.reshape(-1, 2, 4), Y))
    ok = af.softmax_cross_entropy(x.reshape(-1, 8) @ w, t)
    tr = af.Trainer(ok, dataset=(X.reshape(-1, 2, 4), Y), lr=1e-2)
    tr.fit(epochs=2)
    assert tr.predict(X[:7].reshape(7, 2, 4)).shape == (7, 2)
