"""PyTorch's torch.mm on bench/gemm_cold.c's products, warm and cold, one thread, best of 5
rounds: the same JSON lines, for bench/gemm_cold.sh."""
import json
import time

import torch

torch.set_num_threads(1)
PRODUCTS = [("b x W^T", 512, 768, 768, 0, 1), ("b dy W", 512, 768, 768, 0, 0), ("b dy^T x", 768, 768, 512, 1, 0),
            ("s x W1^T", 256, 2048, 768, 0, 1), ("s dy W1", 256, 768, 2048, 0, 0), ("s dy^T x", 2048, 768, 256, 1, 0)]
COLD = 24
torch.manual_seed(0)
for what, m, n, k, ta, tb in PRODUCTS:
    a = [torch.rand(k, m).t() if ta else torch.rand(m, k) for _ in range(COLD)]
    b = [torch.rand(n, k).t() if tb else torch.rand(k, n) for _ in range(COLD)]
    c = [torch.zeros(m, n) for _ in range(COLD)]
    for cold in (0, 1):
        best = 1e30
        for _ in range(5):
            t0 = time.thread_time()
            for i in range(2 * COLD):
                q = i % COLD if cold else 0
                torch.mm(a[q], b[q], out=c[q])
            best = min(best, (time.thread_time() - t0) / (2 * COLD))
        print(json.dumps({"product": what, "m": m, "n": n, "k": k, "case": "cold" if cold else "warm",
                          "gflops": round(2.0 * m * n * k / best * 1e-9, 1)}))
