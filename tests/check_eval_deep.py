#!/usr/bin/env python3
"""`eval llama` on a model deeper than its old fixed table (2 + 9 x 256 params): a
300-layer llama2.c file (dim 8) evaluates, with the same loss as the 1-layer model whose
extra layers are zero (a zero layer adds nothing to the residual stream), and a model
the CLI cannot build gets a message, never an empty one.
usage: check_eval_deep.py ANEFORGE"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

cli = sys.argv[1]
rng = np.random.default_rng(7)
dim, hidden, heads, vocab, seq = 8, 16, 2, 32, 16


def model(path, layers, live):
    """A llama2.c version 0 file whose first `live` layers are random and the rest zero."""
    hs = dim // heads
    def w(*shape, zero=False):
        return np.zeros(shape, np.float32) if zero else (rng.standard_normal(shape) * 0.3).astype(np.float32)
    per_layer = lambda *shape: np.stack([w(*shape, zero=l >= live) for l in range(layers)])
    parts = [w(vocab, dim), np.ones((layers, dim), np.float32), per_layer(dim, dim), per_layer(dim, dim),
             per_layer(dim, dim), per_layer(dim, dim), np.ones((layers, dim), np.float32), per_layer(hidden, dim),
             per_layer(dim, hidden), per_layer(hidden, dim), np.ones(dim, np.float32),
             np.zeros((seq, hs // 2), np.float32), np.zeros((seq, hs // 2), np.float32)]
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, layers, heads, heads, vocab, seq))
        for p in parts:
            f.write(p.tobytes())


fails = []
with tempfile.TemporaryDirectory() as d:
    tok = os.path.join(d, "t.tokens")
    rng.integers(0, vocab, 200).astype("<u2").tofile(tok)
    state = rng.bit_generator.state
    model(os.path.join(d, "deep.bin"), 300, 1)
    rng.bit_generator.state = state  # the same first layer and embedding
    model(os.path.join(d, "one.bin"), 1, 1)
    res = {}
    for name in ("deep", "one"):
        p = subprocess.run([cli, "eval", "llama", "--model", os.path.join(d, name + ".bin"), "--data", tok, "--json"],
                           capture_output=True, text=True, timeout=300)
        if p.returncode:
            fails.append(f"{name}: exit {p.returncode}: {p.stderr.strip()!r}")
            continue
        res[name] = json.loads(p.stdout.strip().splitlines()[-1])["loss"]
    if len(res) == 2 and abs(res["deep"] - res["one"]) > 1e-5:
        fails.append(f"300 layers (299 zero) give loss {res['deep']}, the 1-layer model {res['one']}")
    p = subprocess.run([cli, "eval", "llama", "--model", tok, "--data", tok], capture_output=True, text=True, timeout=60)
    msg = p.stderr.strip()
    if p.returncode == 0 or not msg.split("aneforge eval llama:")[-1].strip():
        fails.append(f"a token file as the model: exit {p.returncode}, message {msg!r}")
for f in fails:
    print("FAIL:", f)
print(f"eval_deep: {3 - len(fails)} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
