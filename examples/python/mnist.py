#!/usr/bin/env python3
"""MNIST from Python, seed 000's usage: parameters as graph leaves, the cross-entropy
handle, a Trainer with the optimizer on the device and its state resident.

    python3 examples/python/mnist.py                      # MLP, host Adam, CPU
    python3 examples/python/mnist.py --target ane-sim:m1 --resident
    python3 examples/python/mnist.py --builtin            # the CLI's net: same accuracy as
                                                          # `aneforge train mlp --data mnist`
Data: data/mnist/ (or --data DIR) with the four IDX files, plain or .gz.
"""
import argparse
import gzip
import os
import shutil
import tempfile

import numpy as np

import aneforge as af


def mnist_dir(root):
    """The IDX files as the library reads them (gunzipped into a temp dir if needed)."""
    d = os.path.join(root, "mnist")
    names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    if all(os.path.exists(os.path.join(d, n)) for n in names):
        return root
    tmp = tempfile.mkdtemp(prefix="aneforge-mnist-")
    os.makedirs(os.path.join(tmp, "mnist"))
    for n in names:
        with gzip.open(os.path.join(d, n + ".gz")) as src, open(os.path.join(tmp, "mnist", n), "wb") as dst:
            shutil.copyfileobj(src, dst)
    return tmp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--resident", action="store_true", help="device optimizer, state resident in the program")
    ap.add_argument("--builtin", action="store_true", help="the CLI's MLP (af.nets.mlp) and options")
    a = ap.parse_args()

    root = mnist_dir(a.data)
    train, test = af.Dataset.load("mnist", root, train=True), af.Dataset.load("mnist", root, train=False)
    X, Y = train.arrays()                        # [60000, 1, 28, 28] in [0, 1], one-hot [60000, 10]
    Xt, _ = test.arrays()
    mean, std = af.data.NORM["mnist"]
    batch, steps = 64, (len(X) // 64) * a.epochs
    opts = dict(dataset=(X, Y), seed=a.seed, batch=batch, lr=3e-3, schedule="cosine", weight_decay=0.05,
                total_steps=steps, target=a.target, device_optimizer=a.resident, resident=a.resident)

    if a.builtin:
        trainer = af.Trainer(af.nets.mlp((1, 28, 28), 128, 10, a.seed, (mean, std)), **opts)
    else:
        rng = np.random.default_rng(a.seed)
        dt = "fp32" if a.target == "cpu" else "fp16"  # engine programs take fp16 inputs
        x = af.input("x", (batch, 1, 28, 28), dt)
        onehot = af.input("onehot", (batch, 10), dt)
        bound1, bound2 = 1 / np.sqrt(784), 1 / np.sqrt(128)  # PyTorch's nn.Linear init
        w1 = af.parameter(rng.uniform(-bound1, bound1, (784, 128)).astype(np.float32), "w1")
        b1 = af.parameter(rng.uniform(-bound1, bound1, 128).astype(np.float32), "b1")
        w2 = af.parameter(rng.uniform(-bound2, bound2, (128, 10)).astype(np.float32), "w2")
        b2 = af.parameter(rng.uniform(-bound2, bound2, 10).astype(np.float32), "b2")
        h = ((x.reshape(-1, 784) - mean) * (1 / std) @ w1 + b1).relu()
        logits = h @ w2 + b2
        ce = af.softmax_cross_entropy(logits, onehot)   # seed 000's CEHandle
        trainer = af.Trainer(ce, optimizer="adam", **opts)

    print("plan %s, %d steps of %d on %s" % (trainer.plan, steps, batch, a.target))
    for epoch in range(a.epochs):
        for info in trainer.iter(epochs=1):
            if info.step % 200 == 0:
                print("\r epoch %d step %d loss %.4f acc %.3f" % (epoch + 1, info.step, info.loss, info.accuracy),
                      end="", flush=True)
        print("\nepoch %d: test accuracy %.4f" % (epoch + 1, trainer.accuracy(Xt, test.labels)))
    print("final test accuracy %.4f" % trainer.accuracy(Xt, test.labels))


if __name__ == "__main__":
    main()
