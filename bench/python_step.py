#!/usr/bin/env python3
"""A training step from Python against the CLI's (issue 25: within 3% at batch 128).

  ANEFORGE_LIBRARY=build/libaneforge.so PYTHONPATH=python python3 bench/python_step.py \
      [--cli build/aneforge] [--data DIR] [--model mlp|cnn] [--batch 128] [--reps 3]

Three figures, medians over --reps interleaved rounds:
  cli     `aneforge train MODEL --json`'s ms_per_step (the time inside af_trainer_step);
  python  Trainer.step(x, y) from Python, same net, options, seed and data order;
  raw     af_trainer_step called straight through ctypes on the same buffers, in the
          same process, alternating with Trainer.step: python - raw is what the Python
          layer adds per step, free of the machine's noise between processes.
Data: DIR/mnist (IDX files), else a synthetic MNIST-shaped set in a temp dir.
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

import aneforge as af


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def synthetic(n=12800, ntest=1000):
    root = tempfile.mkdtemp(prefix="aneforge-bench-")
    os.makedirs(os.path.join(root, "mnist"))
    r = np.random.default_rng(0)
    for split, m in (("train", n), ("t10k", ntest)):
        lab = r.integers(0, 10, m).astype(np.uint8)
        img = (r.random((m, 28, 28)) * 255).astype(np.uint8)
        open(os.path.join(root, "mnist", split + "-images-idx3-ubyte"), "wb").write(
            struct.pack(">IIII", 0x803, m, 28, 28) + img.tobytes())
        open(os.path.join(root, "mnist", split + "-labels-idx1-ubyte"), "wb").write(
            struct.pack(">II", 0x801, m) + lab.tobytes())
    return root


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join("build", "aneforge"))
    ap.add_argument("--data", default=None)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--limit", type=int, default=60000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    root = a.data if a.data and os.path.isdir(os.path.join(a.data, "mnist")) else synthetic(a.limit)
    seed, lr = 1, 3e-3
    train = af.Dataset.load("mnist", root, True)
    X, Y = train.arrays()
    X, Y = X[:a.limit], Y[:a.limit]
    calls = len(X) // a.batch

    def cli():
        out = subprocess.run([a.cli, "train", a.model, "--data", "mnist", "--epochs", "1", "--batch", str(a.batch),
                              "--limit", str(a.limit), "--threads", str(a.threads), "--seed", str(seed), "--json"],
                             env=dict(os.environ, ANEFORGE_DATA=root), capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["ms_per_step"]

    def trainer():
        norm = af.data.NORM["mnist"]
        net = af.nets.mlp((1, 28, 28), 128, 10, seed, norm) if a.model == "mlp" else \
            af.nets.cnn((1, 28, 28), 10, seed, norm)
        return af.Trainer(net, dataset=(X, Y), seed=seed, batch=a.batch, lr=lr, schedule="cosine",
                          weight_decay=0.05, total_steps=2 * calls, threads=a.threads)

    def python_and_raw():
        tp, tr_ = trainer(), trainer()
        batches = [tp._next_batch() for _ in range(calls)]  # the data order, drawn outside the clock
        info = af._cdefs.af_step_info()
        f = af._lib.lib.af_trainer_step
        t_py, t_raw = [], []
        for k, (x, y) in enumerate(batches):  # alternate which goes first: same machine state for both
            if k % 2:
                t0 = time.perf_counter()
                f(tr_.ptr, x.ctypes.data, y.ctypes.data, ctypes.byref(info))
                t1 = time.perf_counter()
                tp.step(x, y)
                t2 = time.perf_counter()
                t_raw.append(t1 - t0)
                t_py.append(t2 - t1)
            else:
                t0 = time.perf_counter()
                tp.step(x, y)
                t1 = time.perf_counter()
                f(tr_.ptr, x.ctypes.data, y.ctypes.data, ctypes.byref(info))
                t2 = time.perf_counter()
                t_py.append(t1 - t0)
                t_raw.append(t2 - t1)
        diff = statistics.median(p - r for p, r in zip(t_py, t_raw))  # paired: the machine's noise cancels
        return 1e3 * sum(t_py) / calls, 1e3 * sum(t_raw) / calls, 1e3 * diff

    rows = []
    for _ in range(a.reps):
        c = cli()
        p, r, d = python_and_raw()
        rows.append((c, p, r, d))
        print("round: cli %.4f ms  python %.4f ms  raw ctypes %.4f ms  paired python - raw %.1f us" % (c, p, r, 1e3 * d),
              flush=True)
    c, p, r, d = (statistics.median(x) for x in zip(*rows))
    print("%s, %d thread(s), %s batch %d, %d steps per round, median of %d rounds:" % (
        cpu_name(), a.threads, a.model, a.batch, calls, a.reps))
    print("  cli %.4f ms/step, python %.4f ms/step (%+.2f%%); the Python layer adds %.1f us/step "
          "(median paired difference, %+.2f%% of the cli step)" % (c, p, 100 * (p - c) / c, 1e3 * d, 100 * d / c))


if __name__ == "__main__":
    sys.exit(main())
