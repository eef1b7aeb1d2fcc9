"""seed 000's Python names as it writes them: af.parameter / af.conv_param leaves,
af.conv2d, af.mha, af.backward(loss, params, stop=...), the CEHandle, Trainer with
optimizer / device_optimizer, step / loss() / accuracy(X, y_labels), UnrolledTrainer with
params, forward, kind, x_inputs, t_inputs, dataset, resident."""
import numpy as np

import aneforge as af


def images(n=256, seed=0):
    r = np.random.default_rng(seed)
    lab = r.integers(0, 2, n)
    X = r.standard_normal((n, 1, 8, 8)).astype(np.float32) * 0.3
    X[lab == 1, :, 2:6, 2:6] += 1.0  # class 1: a bright square
    return X, np.eye(2, dtype=np.float32)[lab], lab


def test_cnn_with_conv_param_trains_through_the_ce_handle():
    X, Y, lab = images()
    r = np.random.default_rng(1)
    with af.Graph():
        x = af.input("x", (32, 1, 8, 8))
        onehot = af.input("onehot", (32, 2))
        wc = af.conv_param(r.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.3)  # PyTorch layout
        wl = af.parameter(r.standard_normal((64, 2)).astype(np.float32) * 0.1)
        h = af.avg_pool(af.conv2d(x, wc, stride=1, pad=1).relu(), 2, 2, 0)          # [32, 4, 4, 4]
        logits = h.reshape(-1, 64) @ wl
        handle = af.CEHandle is af.Loss and af.softmax_cross_entropy(logits, onehot)
        t = af.Trainer(handle, optimizer="adam", device_optimizer=True, dataset=(X, Y), lr=1e-2)
        for _ in range(3 * len(X) // 32):
            t.step()
        assert t.loss() < 0.3
        assert t.accuracy(X, lab) > 0.95
        grads = af.backward(handle, [wc, wl], stop=[wc, wl])
        assert grads[wc].shape == (9, 4) and grads[wl].shape == (64, 2)


def test_mha_block_and_unrolled_trainer():
    r = np.random.default_rng(2)
    B, T, D = 8, 4, 8
    X = r.standard_normal((64, T, D)).astype(np.float32)
    lab = (X[:, 0, 0] > 0).astype(int)
    Y = np.eye(2, dtype=np.float32)[lab]
    g = af.Graph()
    P = [g.parameter("w%d" % i, (r.standard_normal((D, D)) * 0.3).astype(np.float32)) for i in range(4)]
    P.append(g.parameter("head", (r.standard_normal((T * D, 2)) * 0.1).astype(np.float32)))

    def forward(W, x):
        h = af.mha(x, 2, W[0], W[1], W[2], W[3], causal=1) + x
        return h.reshape(-1, T * D) @ W[4]
    x_inputs = [g.input("x%d" % k, (B, T, D)) for k in range(2)]
    t_inputs = [g.input("t%d" % k, (B, 2)) for k in range(2)]
    t = af.UnrolledTrainer(params=P, forward=forward, kind="ce", x_inputs=x_inputs, t_inputs=t_inputs,
                           dataset=(X, Y), resident=True, lr=1e-2)
    first = t.step().loss
    t.fit(epochs=15)
    assert t.loss() < first and t.accuracy(X, lab) > 0.9
