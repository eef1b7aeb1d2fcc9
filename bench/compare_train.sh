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
PY=/usr/bin/python3
TCMALLOC=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -1 || true)
[ -x "$AF" ] || { echo "build first: make build (or pass the build dir)" >&2; exit 2; }
[ -n "$TCMALLOC" ] || echo "note: libtcmalloc-minimal4 not installed; PyTorch runs without it" >&2

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
field() { sed -n "s/.*\"$1\":\([0-9.eE+-]*\).*/\1/p"; }

# The CPU and its vector ISA, as the kernel reports them.
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
isa=baseline
case " $flags " in *" avx512f "*) isa=avx512 ;; *" avx2 "*) isa=avx2 ;; esac
echo "cpu: ${cpu_model:-unknown} (isa: $isa, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg 2>/dev/null))" >&2
env -i "$AF" --version | sed -n 2p | sed 's/^/aneforge /' >&2

# Which OpenBLAS kernels PyTorch gets; when OpenBLAS cannot name the CPU, name the ISA.
coretype=${OPENBLAS_CORETYPE:-}
if [ -z "$coretype" ]; then
    core=$(OPENBLAS_VERBOSE=2 "$PY" -c 'import torch; torch.ones(64, 64) @ torch.ones(64, 64)' 2>&1 |
        sed -n 's/^Core: //p' | head -1 || true)
    case "$core" in
        ""|SkylakeX|Cooperlake|SapphireRapids|Haswell|Zen) ;; # named, or not OpenBLAS
        *) case $isa in avx512) coretype=SkylakeX ;; avx2) coretype=Haswell ;; esac ;;
    esac
    echo "pytorch's openblas core: ${core:-n/a}${coretype:+ -> OPENBLAS_CORETYPE=$coretype}" >&2
fi

for batch in $BATCHES; do
    for model in $MODELS; do
        if [ "$model" = mlp ]; then samples=32000; steps=500; else samples=6400; steps=100; fi
        ours=(); theirs=()
        for ((r = 0; r < ROUNDS; r++)); do
            ours+=("$(env -i ${ANEFORGE_DATA:+ANEFORGE_DATA=$ANEFORGE_DATA} "$AF" train "$model" --data mnist \
                --epochs 1 --limit "$samples" --batch "$batch" --lr 0.001 --schedule constant --weight-decay 0 \
                --threads "$THREADS" --json 2>/dev/null | field ms_per_step)")
            theirs+=("$(OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=$TCMALLOC ${coretype:+OPENBLAS_CORETYPE=$coretype} \
                "$PY" bench/torch_train.py --model "$model" --batch "$batch" --steps "$steps" \
                --threads "$THREADS" --time | field ms_per_step)")
        done
        a=$(printf '%s\n' "${ours[@]}" | median)
        b=$(printf '%s\n' "${theirs[@]}" | median)
        printf '{"model":"%s","batch":%s,"threads":%s,"aneforge_ms_per_step":%s,"pytorch_ms_per_step":%s,"ratio":%.3f}\n' \
            "$model" "$batch" "$THREADS" "$a" "$b" "$(echo "$a / $b" | bc -l)"
    done
done
