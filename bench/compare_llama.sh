#!/usr/bin/env bash
# Llama training step time and loss, aneforge vs PyTorch, in alternating rounds: the same
# llama2.c-architecture model (bench/torch_llama.py writes seeded model.py-style initial
# weights; aneforge starts from them with --init), the same batches (both draw the windows
# with train llama's generator), the same data (the fortunes, `aneforge data fetch text`,
# a 512-token BPE vocabulary) and AdamW (lr, betas 0.9/0.999, decoupled weight decay 0.1,
# constant schedule). aneforge runs on the CPU in fp32 with an empty environment; PyTorch
# at its best (bench/common.sh: OMP_WAIT_POLICY=PASSIVE, tcmalloc, OPENBLAS_CORETYPE when
# its OpenBLAS cannot name the CPU), both on THREADS threads. Prints the CPU first, then
# one JSON line per shape: the median ms/step of each side over ROUNDS runs of STEPS
# steps (each side's first step, its warm-up, left out: aneforge's steady_ms_per_step,
# PyTorch's --warmup 1), their ratio, tokens/s, and each side's validation loss after those steps (on the
# first VAL_TOKENS validation tokens) with their difference in percent. It also measures
# the machine's fp32 multiply-add peak on THREADS threads (bench_fma_peak) and counts the
# step's model FLOPs (the matmuls' and the attention's products, bench_llama_profile with
# 0 runs): floor_ms is the step at that peak, the fastest any fp32 implementation could
# run here; each side's pct_of_peak is model FLOPs per second over the peak.
#   shape a: dim 288, 6 layers, 6 heads, hidden 768, vocab 512, seq 256, batch 4
#   shape b: dim 768, 1 layer, 12 heads, hidden 2048, vocab 512, seq 512, batch 1
#   bench/compare_llama.sh [build dir]
#   ROUNDS=3 STEPS=40 THREADS=2 SHAPES="a b" LR=1e-3 VAL_TOKENS=16384 bench/compare_llama.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
AF=$BUILD/aneforge
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-40}
SHAPES=${SHAPES:-a b}
LR=${LR:-1e-3}
VAL_TOKENS=${VAL_TOKENS:-16384}
WORK=${WORK:-$BUILD/compare_llama}
source bench/common.sh
[ -x "$AF" ] || { echo "build first: make build (or pass the build dir)" >&2; exit 2; }
cpu_banner "$AF"
torch_coretype
peak=$("$BUILD/bench_fma_peak" "$THREADS" 2 | field peak_gflops)
echo "fp32 multiply-add peak on $THREADS threads: $peak GFLOP/s" >&2

# The fortunes as 512-token BPE ids (made once, kept in $WORK).
mkdir -p "$WORK"
if [ ! -s "$WORK/val_small.bin" ]; then
    ANEFORGE_DATA=$WORK/data "$AF" data fetch text >&2
    "$AF" tokenizer train --vocab 512 "$WORK/data/text/train.txt" -o "$WORK/tok512.bin" >&2
    "$AF" data tokenize --tokenizer "$WORK/tok512.bin" "$WORK/data/text/train.txt" -o "$WORK/train.bin" >&2
    "$AF" data tokenize --tokenizer "$WORK/tok512.bin" "$WORK/data/text/val.txt" -o "$WORK/val.bin" >&2
    head -c $((2 * (VAL_TOKENS + 1))) "$WORK/val.bin" > "$WORK/val_small.bin"
fi

for shape in $SHAPES; do
    case $shape in
        a) dim=288 layers=6 heads=6 hidden=768 seq=256 batch=4 ;;
        b) dim=768 layers=1 heads=12 hidden=2048 seq=512 batch=1 ;;
        *) echo "unknown shape '$shape' (a or b)" >&2; exit 2 ;;
    esac
    init=$WORK/init_$shape.bin
    gflop=$("$BUILD/bench_llama_profile" $dim $layers $heads $heads $hidden 512 $seq $batch 0 | field gflop_products)
    "$PY" bench/torch_llama.py --write-init "$init" --dim $dim --layers $layers --heads $heads --hidden $hidden \
        --vocab 512 --seq $seq
    ours() {
        env -i "$AF" train llama --init "$init" --data "$WORK/train.bin" --val "$WORK/val_small.bin" --steps "$STEPS" \
            --batch $batch --seq $seq --lr "$LR" --schedule constant --weight-decay 0.1 --threads "$THREADS" --json 2>/dev/null
    }
    theirs() {
        torch_best "$PY" bench/torch_llama.py --init "$init" --data "$WORK/train.bin" --val "$WORK/val_small.bin" \
            --steps "$STEPS" --warmup 1 --batch $batch --seq $seq --lr "$LR" --weight-decay 0.1 --threads "$THREADS"
    }
    ms_a=(); ms_b=(); vl_a=(); vl_b=()
    for ((r = 0; r < ROUNDS; r++)); do
        if ((r % 2 == 0)); then a=$(ours); b=$(theirs); else b=$(theirs); a=$(ours); fi
        echo "shape $shape round $((r + 1)): aneforge $(echo "$a" | field steady_ms_per_step) ms/step," \
            "pytorch $(echo "$b" | field ms_per_step) ms/step (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        ms_a+=("$(echo "$a" | field steady_ms_per_step)"); vl_a+=("$(echo "$a" | field val_loss)")
        ms_b+=("$(echo "$b" | field ms_per_step)"); vl_b+=("$(echo "$b" | field val_loss)")
    done
    ma=$(printf '%s\n' "${ms_a[@]}" | median)
    mb=$(printf '%s\n' "${ms_b[@]}" | median)
    va=$(printf '%s\n' "${vl_a[@]}" | median)
    vb=$(printf '%s\n' "${vl_b[@]}" | median)
    printf '{"shape":"%s","dim":%d,"layers":%d,"heads":%d,"hidden":%d,"vocab":512,"seq":%d,"batch":%d,"threads":%s,' \
        "$shape" $dim $layers $heads $hidden $seq $batch "$THREADS"
    printf '"steps":%s,"rounds":%s,"aneforge_ms_per_step":%s,"pytorch_ms_per_step":%s,"ratio":%.3f,' \
        "$STEPS" "$ROUNDS" "$ma" "$mb" "$(echo "$ma / $mb" | bc -l)"
    printf '"aneforge_tokens_per_s":%.0f,"pytorch_tokens_per_s":%.0f,' \
        "$(echo "$batch * $seq * 1000 / $ma" | bc -l)" "$(echo "$batch * $seq * 1000 / $mb" | bc -l)"
    printf '"aneforge_val_loss":%s,"pytorch_val_loss":%s,"val_loss_diff_pct":%.3f,' \
        "$va" "$vb" "$(echo "100 * ($va - $vb) / $vb" | bc -l)"
    printf '"gflop_per_step":%.2f,"peak_gflops":%s,"floor_ms":%.1f,"aneforge_pct_of_peak":%.1f,"pytorch_pct_of_peak":%.1f}\n' \
        "$gflop" "$peak" "$(echo "1000 * $gflop / $peak" | bc -l)" \
        "$(echo "100 * $gflop * 1000 / $ma / $peak" | bc -l)" "$(echo "100 * $gflop * 1000 / $mb / $peak" | bc -l)"
done
