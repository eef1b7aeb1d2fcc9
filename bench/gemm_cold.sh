#!/usr/bin/env bash
# Our GEMM against PyTorch's (its MKL/oneDNN) on the llama step's products, one thread,
# operands warm and cold (bench/gemm_cold.c), alternating the two sides for ROUNDS rounds
# and printing each cell's median GFLOP/s. PyTorch at its best: the venv's current build
# (bench/compare_torch.sh makes it), tcmalloc, OMP_WAIT_POLICY=PASSIVE.
#   bench/gemm_cold.sh [build dir]        ROUNDS=3 by default
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-3}
VENV=${VENV:-$BUILD/torch-venv}
[ -x "$BUILD/bench_gemm_cold" ] || { echo "build first: make build" >&2; exit 2; }
[ -x "$VENV/bin/python" ] || { echo "no PyTorch venv at $VENV: run bench/compare_torch.sh once" >&2; exit 2; }
TCMALLOC=$(ls /usr/lib/*/libtcmalloc.so.4 2>/dev/null | head -1 || true)
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 0; r < ROUNDS; r++)); do
    "$BUILD/bench_gemm_cold" | sed 's/^{/{"side":"aneforge",/' >> "$out"
    env OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 LD_PRELOAD="$TCMALLOC" "$VENV/bin/python" bench/torch_gemm_cold.py |
        sed 's/^{/{"side":"torch",/' >> "$out"
done
python3 - "$out" <<'PY'
import collections, json, statistics, sys
cells = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["product"], r["m"], r["n"], r["k"])
    if key not in order:
        order.append(key)
    cells[key + (r["case"], r["side"])].append(r["gflops"])
print("| product | M x N x K | ours warm | PyTorch warm | ours cold | PyTorch cold | cold: ours / PyTorch |")
print("|---|---|---|---|---|---|---|")
for key in order:
    med = {(c, s): statistics.median(cells[key + (c, s)]) for c in ("warm", "cold") for s in ("aneforge", "torch")}
    print(f"| {key[0]} | {key[1]} x {key[2]} x {key[3]} | {med['warm', 'aneforge']:.0f} | {med['warm', 'torch']:.0f} | "
          f"{med['cold', 'aneforge']:.0f} | {med['cold', 'torch']:.0f} | {med['cold', 'aneforge'] / med['cold', 'torch']:.2f} |")
PY
