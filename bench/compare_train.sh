#!/usr/bin/env bash
# Training step time, aneforge vs PyTorch, back to back in one invocation: the same
# model, batch, optimizer (Adam, constant lr) and thread count. PyTorch runs at its best:
# OMP_WAIT_POLICY=PASSIVE and tcmalloc preloaded. Prints one JSON line per model with the
# median ms/step of each side over ROUNDS alternating runs, and their ratio.
#   bench/compare_train.sh [build dir]     (needs MNIST: aneforge data fetch mnist)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
AF=$BUILD/aneforge
THREADS=${THREADS:-2}
BATCH=${BATCH:-64}
ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
TCMALLOC=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -1 || true)
[ -x "$AF" ] || { echo "build first: make build (or pass the build dir)" >&2; exit 2; }
[ -n "$TCMALLOC" ] || echo "note: libtcmalloc-minimal4 not installed; PyTorch runs without it" >&2

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p"; }

for model in mlp cnn; do
    if [ "$model" = mlp ]; then samples=32000; steps=500; else samples=6400; steps=100; fi
    ours=(); theirs=()
    for ((r = 0; r < ROUNDS; r++)); do
        ours+=("$("$AF" train "$model" --data mnist --epochs 1 --limit "$samples" --batch "$BATCH" --lr 0.001 \
            --schedule constant --weight-decay 0 --threads "$THREADS" --json 2>/dev/null | field ms_per_step)")
        theirs+=("$(OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=$TCMALLOC "$PY" bench/torch_train.py --model "$model" \
            --batch "$BATCH" --steps "$steps" --threads "$THREADS" --time | field ms_per_step)")
    done
    a=$(printf '%s\n' "${ours[@]}" | median)
    b=$(printf '%s\n' "${theirs[@]}" | median)
    printf '{"model":"%s","batch":%s,"threads":%s,"aneforge_ms_per_step":%s,"pytorch_ms_per_step":%s,"ratio":%.3f}\n' \
        "$model" "$BATCH" "$THREADS" "$a" "$b" "$(echo "$a / $b" | bc -l)"
done
