#!/usr/bin/env bash
# Training step time, aneforge vs PyTorch, back to back in one invocation: the same
# model, batch, optimizer (Adam, constant lr) and thread count. PyTorch runs at its best:
# OMP_WAIT_POLICY=PASSIVE, tcmalloc preloaded, and OPENBLAS_CORETYPE set to the CPU's
# instruction set when the OpenBLAS under PyTorch cannot name the CPU (it then falls back
# to SSE3 kernels). aneforge runs with an empty environment: its kernels come from the
# CPU's own features. Prints the CPU, then one JSON line per model and batch with the
# median ms/step of each side over ROUNDS alternating runs, and their ratio.
#   bench/compare_train.sh [build dir]     (needs MNIST: aneforge data fetch mnist)
#   BATCHES="64 128" ROUNDS=5 THREADS=2 MODELS="mlp cnn" bench/compare_train.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
AF=$BUILD/aneforge
THREADS=${THREADS:-2}
BATCHES=${BATCHES:-${BATCH:-64 128}}
ROUNDS=${ROUNDS:-3}
MODELS=${MODELS:-mlp cnn}
source bench/common.sh
[ -x "$AF" ] || { echo "build first: make build (or pass the build dir)" >&2; exit 2; }
cpu_banner "$AF"
torch_coretype

for batch in $BATCHES; do
    for model in $MODELS; do
        if [ "$model" = mlp ]; then samples=32000; steps=500; else samples=6400; steps=100; fi
        ours=(); theirs=()
        for ((r = 0; r < ROUNDS; r++)); do
            ours+=("$(env -i ${ANEFORGE_DATA:+ANEFORGE_DATA=$ANEFORGE_DATA} "$AF" train "$model" --data mnist \
                --epochs 1 --limit "$samples" --batch "$batch" --lr 0.001 --schedule constant --weight-decay 0 \
                --threads "$THREADS" --json 2>/dev/null | field ms_per_step)")
            theirs+=("$(torch_best "$PY" bench/torch_train.py --model "$model" --batch "$batch" --steps "$steps" \
                --threads "$THREADS" --time | field ms_per_step)")
        done
        a=$(printf '%s\n' "${ours[@]}" | median)
        b=$(printf '%s\n' "${theirs[@]}" | median)
        printf '{"model":"%s","batch":%s,"threads":%s,"aneforge_ms_per_step":%s,"pytorch_ms_per_step":%s,"ratio":%.3f}\n' \
            "$model" "$batch" "$THREADS" "$a" "$b" "$(echo "$a / $b" | bc -l)"
    done
done
