#!/usr/bin/env python3
"""Seed 000's UnrolledTrainer on the simulated Neural Engine: K Adam steps unrolled into
one program, optimizer state resident on the engine, the host feeding K minibatches and
their learning rates per dispatch.

    python3 examples/python/unrolled_ane_sim.py [--data data] [--K 4] [--family m1]
Data: data/mnist/ (IDX files, plain or .gz); without it a synthetic two-class set.
"""
import argparse
import os

import numpy as np

import aneforge as af


def load(data):
    if os.path.isdir(os.path.join(data, "mnist")):
        from mnist import mnist_dir
        train = af.Dataset.load("mnist", mnist_dir(data), train=True)
        X, Y = train.arrays()
        return X.reshape(len(X), 784), Y, train.labels
    r = np.random.default_rng(0)
    X = r.standard_normal((4096, 784)).astype(np.float32)
    lab = (X[:, :10].sum(1) > 0).astype(int)
    return X, np.eye(10, dtype=np.float32)[lab], lab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data")
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--family", default="m1")
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    X, Y, labels = load(a.data)
    batch, rng = 128, np.random.default_rng(1)

    w1 = af.parameter(rng.uniform(-1 / 28, 1 / 28, (784, 128)).astype(np.float32), "w1")
    b1 = af.parameter(np.zeros(128, np.float32), "b1")
    w2 = af.parameter(rng.uniform(-1 / 11.3, 1 / 11.3, (128, 10)).astype(np.float32), "w2")
    b2 = af.parameter(np.zeros(10, np.float32), "b2")

    def forward(P, x):           # the model from the current-step weights P and a batch x
        return (x @ P[0] + P[1]).relu() @ P[2] + P[3]

    x_inputs = [af.input("x%d" % k, (batch, 784), "fp16") for k in range(a.K)]
    t_inputs = [af.input("t%d" % k, (batch, 10), "fp16") for k in range(a.K)]
    trainer = af.UnrolledTrainer([w1, b1, w2, b2], forward, kind="ce", x_inputs=x_inputs, t_inputs=t_inputs,
                                 dataset=(X, Y), resident=True, target="ane-sim:" + a.family, lr=2e-3)
    print("plan %s: %d steps per dispatch, state resident" % (trainer.plan, trainer.steps_per_call))
    for info in trainer.iter(epochs=a.epochs):
        if (info.step // a.K) % 50 == 0:
            print("step %5d  loss %.4f  acc %.3f  (%s, %d dispatch)" % (
                info.step, info.loss, info.accuracy, info.metric_source, info.stats.dispatches))
    print("train accuracy %.4f after %d steps" % (trainer.accuracy(X, labels), trainer.last.step))
    s = trainer.stats
    print("programs compiled %d, dispatches %d, est. %s time %.1f ms" % (
        s.compiles, s.dispatches, a.family, af.estimate_us("ane-sim:" + a.family, s) / 1e3))


if __name__ == "__main__":
    main()
