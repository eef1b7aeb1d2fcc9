#!/usr/bin/env python3
"""The reference for `aneforge train`: the same MLP and CNN, optimizer and batch in PyTorch.

  python3 bench/torch_train.py --model mlp --epochs 5          # accuracy run
  python3 bench/torch_train.py --model cnn --steps 200 --time  # ms/step only

Reads the IDX files that `aneforge data fetch` installs ($ANEFORGE_DATA or ./data), or
their .gz as shipped in data/mnist/.
Run PyTorch at its best: bench/compare_train.sh sets OMP_WAIT_POLICY=PASSIVE,
preloads tcmalloc and uses the same thread count as aneforge.
"""
import argparse, contextlib, gzip, os, struct, sys, time

try:
    import numpy as np
    import torch
    import torch_best
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise


def idx(path):
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            data = f.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    magic, = struct.unpack(">I", data[:4])
    nd = magic & 0xFF
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load(name, split):
    d = os.path.join(os.environ.get("ANEFORGE_DATA", "data"), name)
    pre = "train" if split == "train" else "t10k"
    x = idx(os.path.join(d, pre + "-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = idx(os.path.join(d, pre + "-labels-idx1-ubyte")).astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def model(kind):
    if kind == "mlp":
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--data", default="mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (timing runs)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time", action="store_true", help="print only the ms/step JSON")
    ap.add_argument("--warmup", type=int, default=0, help="steps left out of the timing")
    ap.add_argument("--mode", choices=["eager", "compile", "bf16"], default="eager",
                    help="torch.compile the model, or autocast to bf16 (torch.autocast('cpu', torch.bfloat16))")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "test")
    net = model(a.model)
    fwd = torch.compile(net) if a.mode == "compile" else net
    cast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.mode == "bf16" else contextlib.nullcontext
    opt, opt_kind = torch_best.adam(torch.optim.Adam, net.parameters(), lr=a.lr)
    lossf = torch.nn.CrossEntropyLoss()
    steps, train_s = 0, 0.0
    g = torch.Generator().manual_seed(a.seed)
    for ep in range(a.epochs):
        perm = torch.randperm(len(xtr), generator=g)
        for b in range(len(xtr) // a.batch):
            idx_ = perm[b * a.batch:(b + 1) * a.batch]
            x, y = xtr[idx_], ytr[idx_]
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with cast():
                loss = lossf(fwd(x), y)
            loss.backward()
            opt.step()
            if steps >= a.warmup:
                train_s += time.perf_counter() - t0
            steps += 1
            if a.steps and steps >= a.steps:
                break
        if a.steps and steps >= a.steps:
            break
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
    print('{"framework":"pytorch","version":"%s","mode":"%s","model":"%s","test_acc":%.4f,"ms_per_step":%.4f,'
          '"steps":%d,"threads":%d,"optimizer":"%s"}' % (torch.__version__, a.mode, a.model, acc,
                                        1000 * train_s / max(steps - a.warmup, 1), steps, a.threads, opt_kind))


if __name__ == "__main__":
    main()
