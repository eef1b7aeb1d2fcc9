#!/usr/bin/env python3
"""The reference for `aneforge train llama`: llama2.c's model.py architecture, the same
batches of token windows and AdamW, in PyTorch (float32, CPU).

  python3 bench/torch_llama.py --write-init init.bin --dim 288 --layers 6 --heads 6 --hidden 768 --vocab 512 --seq 256
  python3 bench/torch_llama.py --init init.bin --data train.bin --val val.bin --batch 4 --seq 256 --steps 60

--write-init draws model.py-style weights (matrices N(0, 0.02), norms 1, seeded) and
writes them as a llama2.c version-1 file, so `aneforge train llama --init` starts from the
same weights. Windows are drawn as `aneforge train llama` draws them (splitmix64 seeded
by --seed, start = next % (tokens - seq)), so both sides see the same batches. Prints one
JSON line: ms_per_step (forward, backward and optimizer step, timed after --warmup steps),
tokens_per_s, train_loss (mean of the last 10 steps) and val_loss (mean nats per token over
--val in windows of seq + 1 at stride seq). With --phases it also gives ms_fwd_bwd (zeroing
the gradients, forward, loss and backward) and ms_optimizer (opt.step()), each the mean
over the timed steps, as `aneforge train llama --log` splits its steps (bench/compare_torch.sh
PHASES=1). bench/compare_llama.sh runs it at its best
(OMP_WAIT_POLICY=PASSIVE, tcmalloc, the thread count, OPENBLAS_CORETYPE).
"""
import argparse
import contextlib
import json
import math
import os
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch_best
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

M64 = (1 << 64) - 1
V1_ORDER = ["rms_att", "rms_ffn", "rms_final", "emb", "wq", "wk", "wv", "wo", "w1", "w2", "w3"]


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["dim"], c["dim"] // c["heads"]
        self.nh, self.nkv, self.hd = c["heads"], c["kv_heads"], hd
        self.wq = nn.Linear(d, c["heads"] * hd, bias=False)
        self.wk = nn.Linear(d, c["kv_heads"] * hd, bias=False)
        self.wv = nn.Linear(d, c["kv_heads"] * hd, bias=False)
        self.wo = nn.Linear(c["heads"] * hd, d, bias=False)
        self.w1 = nn.Linear(d, c["hidden"], bias=False)
        self.w2 = nn.Linear(c["hidden"], d, bias=False)
        self.w3 = nn.Linear(d, c["hidden"], bias=False)
        self.attention_norm, self.ffn_norm = RMSNorm(d), RMSNorm(d)

    def forward(self, x, freqs_cis, mask):
        b, s, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, s, self.nh, self.hd)
        k = self.wk(h).view(b, s, self.nkv, self.hd)
        v = self.wv(h).view(b, s, self.nkv, self.hd)
        fc = freqs_cis.view(1, s, 1, self.hd // 2)
        q = torch.view_as_real(torch.view_as_complex(q.reshape(b, s, self.nh, -1, 2)) * fc).flatten(3)
        k = torch.view_as_real(torch.view_as_complex(k.reshape(b, s, self.nkv, -1, 2)) * fc).flatten(3)
        if self.nkv != self.nh:
            rep = self.nh // self.nkv
            k = k[:, :, :, None, :].expand(b, s, self.nkv, rep, self.hd).reshape(b, s, self.nh, self.hd)
            v = v[:, :, :, None, :].expand(b, s, self.nkv, rep, self.hd).reshape(b, s, self.nh, self.hd)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        att = F.softmax(q @ k.transpose(2, 3) / math.sqrt(self.hd) + mask[:, :, :s, :s], dim=-1)
        x = x + self.wo((att @ v).transpose(1, 2).contiguous().view(b, s, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.emb = nn.Embedding(c["vocab"], c["dim"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["dim"])
        self.output = nn.Linear(c["dim"], c["vocab"], bias=False)
        self.emb.weight = self.output.weight  # tied, as model.py
        hd = c["dim"] // c["heads"]
        freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
        ang = torch.outer(torch.arange(c["seq"]).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(ang), ang))
        self.register_buffer("mask", torch.full((1, 1, c["seq"], c["seq"]), float("-inf")).triu(1))

    def forward(self, tokens):
        h = self.emb(tokens)
        for layer in self.layers:
            h = layer(h, self.freqs_cis[: tokens.shape[1]], self.mask)
        return self.output(self.norm(h))


def tensors(model):
    """llama2.c's tensors (stacked over layers) of the module."""
    L = model.layers
    return {"emb": model.emb.weight, "rms_final": model.norm.weight,
            "rms_att": [b.attention_norm.weight for b in L], "rms_ffn": [b.ffn_norm.weight for b in L],
            **{n: [getattr(b, n).weight for b in L] for n in ("wq", "wk", "wv", "wo", "w1", "w2", "w3")}}


def write_v1(path, c, model):
    head = struct.pack("<Ii7iB", 0x616B3432, 1, c["dim"], c["hidden"], c["layers"], c["heads"], c["kv_heads"],
                       c["vocab"], c["seq"], 1)
    t = tensors(model)
    with open(path, "wb") as f:
        f.write(head + b"\0" * (256 - len(head)))
        for name in V1_ORDER:
            for p in (t[name] if isinstance(t[name], list) else [t[name]]):
                f.write(p.detach().numpy().astype("<f4").tobytes())


def read_v1(path, model):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, dim, hidden, layers, heads, kv, vocab, seq, shared = struct.unpack("<Ii7iB", data[:37])
    assert magic == 0x616B3432 and version == 1 and shared == 1, "a version-1 file with a shared classifier"
    off, t = 256, tensors(model)
    with torch.no_grad():
        for name in V1_ORDER:
            for p in (t[name] if isinstance(t[name], list) else [t[name]]):
                n = p.numel()
                p.copy_(torch.from_numpy(np.frombuffer(data, "<f4", n, off).copy()).view_as(p))
                off += 4 * n
    assert off == len(data), "file size"
    return dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv, vocab=vocab, seq=seq)


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def val_loss(model, val, seq, batch):
    windows = (len(val) - 1) // seq
    total = 0.0
    with torch.no_grad():
        for w0 in range(0, windows, batch):
            idx = range(w0, min(windows, w0 + batch))
            x = torch.stack([torch.from_numpy(val[i * seq:i * seq + seq].astype(np.int64)) for i in idx])
            y = torch.stack([torch.from_numpy(val[i * seq + 1:i * seq + seq + 1].astype(np.int64)) for i in idx])
            logits = model(x).double()
            total += F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), reduction="sum").item()
    return total / (windows * seq)


def main():
    ap = argparse.ArgumentParser()
    for k, v in dict(dim=288, layers=6, heads=6, kv_heads=0, hidden=768, vocab=512, seq=256, batch=4, steps=20,
                     threads=2, seed=1, warmup=2).items():
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--write-init", help="write seeded initial weights as a llama2.c v1 file and exit")
    ap.add_argument("--init", help="start from this llama2.c v1 file (its config)")
    ap.add_argument("--data")
    ap.add_argument("--val")
    ap.add_argument("--mode", choices=["eager", "compile", "bf16"], default="eager",
                    help="torch.compile the model, or autocast to bf16 (torch.autocast('cpu', torch.bfloat16))")
    ap.add_argument("--phases", action="store_true", help="also time the forward+backward and the optimizer apart")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    c = dict(dim=a.dim, hidden=a.hidden, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads or a.heads,
             vocab=a.vocab, seq=a.seq)
    if a.init:
        with open(a.init, "rb") as f:
            hdr = struct.unpack("<Ii7i", f.read(36))
        c = dict(zip(["dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq"], hdr[2:]))
    model = Transformer(c)
    if a.write_init:
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.02)
        write_v1(a.write_init, c, model)
        return
    if a.init:
        read_v1(a.init, model)
    seq, batch = a.seq, a.batch
    train = np.fromfile(a.data, dtype="<u2")
    opt, opt_kind = torch_best.adam(torch.optim.AdamW, model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=a.weight_decay, foreach=True)
    fwd = torch.compile(model) if a.mode == "compile" else model
    cast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.mode == "bf16" else contextlib.nullcontext
    rng = (a.seed * 0x9E3779B97F4A7C15 + 11) & M64  # aneforge train llama's window generator
    losses, timed_s, timed, fb_s = [], 0.0, 0, 0.0
    for step in range(a.steps):
        starts = []
        for _ in range(batch):
            rng, r = splitmix(rng)
            starts.append(r % (len(train) - seq))
        w = torch.from_numpy(np.stack([train[s:s + seq + 1].astype(np.int64) for s in starts]))
        x, y = w[:, :-1], w[:, 1:]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with cast():
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= a.warmup:
            timed_s += dt
            fb_s += t1 - t0
            timed += 1
        losses.append(loss.item())
    vl = val_loss(model, np.fromfile(a.val, dtype="<u2"), seq, batch) if a.val else None
    ms = 1000 * timed_s / max(timed, 1)
    phases = {}
    if a.phases:
        fb = 1000 * fb_s / max(timed, 1)
        phases = {"ms_fwd_bwd": round(fb, 4), "ms_optimizer": round(ms - fb, 4)}
    print(json.dumps({**phases, "framework": "pytorch", "version": torch.__version__, "mode": a.mode, "train_loss": round(sum(losses[-10:]) / len(losses[-10:]), 6),
                      "val_loss": round(vl, 6) if vl is not None else None, "steps": a.steps,
                      "ms_per_step": round(ms, 4), "optimizer": opt_kind, "tokens_per_s": round(batch * seq * 1000 / ms, 1),
                      "threads": a.threads}))


if __name__ == "__main__":
    main()
