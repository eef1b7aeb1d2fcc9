#!/usr/bin/env bash
# aneforge against the PyTorch users install today, on every workload we quote, in one
# command. Sides (SIDES):
#   aneforge       CPU, fp32, an empty environment
#   aneforge_bf16  the same with --precision bf16 (matmul/conv GEMMs in bf16, fp32 sums;
#                  left out, with a note, where the CPU lacks AMX-BF16 and AVX512-BF16)
#   torch          PyTorch $TORCH_VERSION (from the package registry into $VENV), eager
#   torch_compile  the same with torch.compile(model) (its first steps, the compile, left out)
#   torch_bf16     the same under torch.autocast("cpu", dtype=torch.bfloat16) (llama only)
#   debian         Debian's python3-torch (1.13, OpenBLAS), eager, kept for history while
#                  it installs; the side is skipped where /usr/bin/python3 has no torch
# PyTorch runs at its best: tcmalloc (libgoogle-perftools4) preloaded, OMP_WAIT_POLICY=
# PASSIVE, OMP/OpenBLAS on THREADS threads, as aneforge, and its fused Adam/AdamW where it
# has one for the CPU (bench/torch_best.py: 2.4 and later; the Debian side keeps its
# foreach or per-parameter loop). Workloads (WORKLOADS):
#   mlp64 mlp128 cnn64 cnn128   the MLP and CNN on the shipped MNIST (data/mnist), Adam
#   llama_a llama_b             compare_llama.sh's shapes a and b on the fortunes, AdamW
#   stories110m                 seed 002's model (dim 768, 12 layers, vocab 32000), batch 1, seq 256
# Each round runs every side once, the order rotated round by round, so a busy moment on
# the shared machine hits every side; a workload's line gives each side's median ms/step
# with its min and max over ROUNDS rounds, its peak resident memory (MiB, the median of
# GNU time's maximum RSS), the validation loss (llama), and every ratio to aneforge's
# median, both as the ratio of the medians and as the median of the rounds' ratios
# ("_paired"). The first lines name the CPU (model, family/model/stepping, the vector flags)
# and its fp32 and bf16 peaks measured on the spot (bench_fma_peak on THREADS threads).
# PHASES=1 (llama workloads, sides aneforge and torch) splits each step as `train llama
# --log` does, the forward+backward apart from the optimizer (every llama workload then
# runs 11 steps: the log's step-11 line is the mean of steps 2-11, PyTorch's timing
# starts at step 2 too), and adds what the 0.7x-eager target asks of our forward+backward:
# the budget left by our optimizer, the share of the fp32 peak it needs against the share
# each side reaches, and the memory's rate for the update (bench_update_rate).
#   bench/compare_torch.sh [build dir]
#   ROUNDS=3 THREADS=2 WORKLOADS="llama_a" SIDES="aneforge torch" bench/compare_torch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
AF=$BUILD/aneforge
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
WORKLOADS=${WORKLOADS:-mlp64 mlp128 cnn64 cnn128 llama_a llama_b stories110m}
SIDES=${SIDES:-aneforge aneforge_bf16 torch torch_compile torch_bf16 debian}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
VENV=${VENV:-$BUILD/torch-venv}
WORK=${WORK:-$BUILD/compare_torch}
LLAMA_STEPS=${LLAMA_STEPS:-12}
PHASES=${PHASES:-0}
source bench/common.sh
[ -x "$AF" ] || { echo "build first: make build (or pass the build dir)" >&2; exit 2; }
cpu_banner "$AF"

# What the comparison needs, installed when missing: tcmalloc (Debian), the fortunes
# (Debian), PyTorch and numpy (package registry, into the venv), and for the debian side
# python3-torch (Debian).
need_deb() { dpkg -s "$1" >/dev/null 2>&1 || { [ "$(id -u)" = 0 ] && apt-get install -y -q "$1" >&2; } || true; }
need_deb libgoogle-perftools4
need_deb fortunes
TCMALLOC=$(ls /usr/lib/*/libtcmalloc.so.4 2>/dev/null | head -1 || true)
[ -n "$TCMALLOC" ] || echo "note: libgoogle-perftools4 missing; PyTorch runs without tcmalloc" >&2
if ! "$VENV/bin/python" -c "import numpy, torch; assert torch.__version__.startswith('$TORCH_VERSION')" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy >&2
fi
TPY=$VENV/bin/python
DEBPY=/usr/bin/python3
# Debian's PyTorch 1.13 for the history column, while the distribution still ships it.
if [[ " $SIDES " == *" debian "* ]] && ! $DEBPY -c 'import torch, numpy' 2>/dev/null; then
    need_deb python3-torch
    if ! $DEBPY -c 'import torch, numpy' 2>/dev/null; then
        echo "note: no python3-torch under $DEBPY; the debian column is left out" >&2
        SIDES=${SIDES/debian/}
    fi
fi

# The CPU, named the way a reader can look it up, and its peaks now.
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
cpu_fms=$(awk -F': ' '/^cpu family/{f=$2} /^model[ \t]*:/{m=$2} /^stepping/{s=$2} END {printf "family %s model %s stepping %s", f, m, s}' /proc/cpuinfo)
cpu_flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr ' ' '\n' |
    grep -E '^(avx2|fma|avx512f|avx512_bf16|avx512_fp16|avx512_vnni|amx_tile|amx_bf16|amx_int8)$' | tr '\n' ' ')
peaks=$("$BUILD/bench_fma_peak" "$THREADS" 1)
peak_of() { echo "$peaks" | sed -n "s/.*\"$1\":\([0-9.a-z]*\).*/\1/p"; } # peak_of FIELD: a number or null
echo "cpu: $cpu_model ($cpu_fms; $(nproc) cores; flags: ${cpu_flags% }; load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
echo "peaks on $THREADS threads: fp32 FMA $(echo "$peaks" | field peak_gflops) GFLOP/s," \
    "bf16 dot $(peak_of bf16_dot_gflops), AMX bf16 $(peak_of amx_bf16_gflops)" >&2
# bf16 needs AMX-BF16 or AVX512-BF16 (aneforge refuses it elsewhere): without either
# neither bf16 side is run (autocast would emulate bf16 and time nothing we compare).
if [ "$(peak_of bf16_dot_gflops)" = null ] && [ "$(peak_of amx_bf16_gflops)" = null ] &&
    [[ " $SIDES " == *" aneforge_bf16 "* || " $SIDES " == *" torch_bf16 "* ]]; then
    echo "note: this CPU has neither AMX-BF16 nor AVX512-BF16; the bf16 sides are left out" >&2
    SIDES=$(echo " $SIDES " | sed 's/ aneforge_bf16 / /; s/ torch_bf16 / /')
fi
opt_kind() { # the Adam the scripts get from bench/torch_best.py with this Python
    "$1" -c 'import sys; sys.path.insert(0, "bench"); import torch, torch_best
print(torch_best.adam(torch.optim.Adam, [torch.nn.Parameter(torch.zeros(1))])[1])' 2>/dev/null || echo unknown
}
echo "pytorch $($TPY -c 'import torch; print(torch.__version__)') (venv), tcmalloc ${TCMALLOC:-none}, Adam $(opt_kind "$TPY")" >&2
PY=$DEBPY
[[ " $SIDES " != *" debian "* ]] || { echo "debian pytorch $($DEBPY -c 'import torch; print(torch.__version__)'), Adam $(opt_kind "$DEBPY")" >&2; torch_coretype; }
cpu_json=$(printf '"cpu":"%s","cpu_id":"%s","flags":"%s","peak_fp32_gflops":%s' "$cpu_model" "$cpu_fms" \
    "${cpu_flags% }" "$(echo "$peaks" | field peak_gflops)")

mkdir -p "$WORK"
fortunes() {
    [ -s "$WORK/val_small.bin" ] && return 0
    ANEFORGE_DATA=$WORK/data "$AF" data fetch text >&2
    "$AF" tokenizer train --vocab 512 "$WORK/data/text/train.txt" -o "$WORK/tok512.bin" >&2
    "$AF" data tokenize --tokenizer "$WORK/tok512.bin" "$WORK/data/text/train.txt" -o "$WORK/train.bin" >&2
    "$AF" data tokenize --tokenizer "$WORK/tok512.bin" "$WORK/data/text/val.txt" -o "$WORK/val.bin" >&2
    head -c $((2 * 16385)) "$WORK/val.bin" > "$WORK/val_small.bin"
    head -c $((2 * 2049)) "$WORK/val.bin" > "$WORK/val_tiny.bin"
}

# PyTorch at its best (a command prefix: GNU time runs it).
torch_env=(env OMP_WAIT_POLICY=PASSIVE LD_PRELOAD="$TCMALLOC" OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
    ${coretype:+OPENBLAS_CORETYPE=$coretype})
# measure SIDE: runs one side of the current workload; prints "ms rss_mib val_loss
# fwd_bwd_ms optimizer_ms" (the last two "-" unless PHASES=1 splits a llama step).
measure() {
    local side=$1 out rss py mode ms vl prec=() log=() fb=- opt=-
    case $side in
        aneforge) py= ;;
        aneforge_bf16) py= prec=(--precision bf16) ;;
        torch) py=$TPY mode=eager ;;
        torch_compile) py=$TPY mode=compile ;;
        torch_bf16) py=$TPY mode=bf16 ;;
        debian) py=$DEBPY mode=eager ;;
    esac
    if [ -z "$py" ]; then
        if [ "$kind" = llama ]; then
            [ "$PHASES" != 1 ] || { rm -f "$WORK/phases.jsonl"; log=(--log "$WORK/phases.jsonl"); }
            out=$(/usr/bin/time -f '%M' -o "$WORK/rss" env -i "$AF" train llama --init "$init" --data "$WORK/train.bin" \
                --val "$val" --steps "$steps" --batch $batch --seq $seq --lr 1e-3 --schedule constant \
                --weight-decay 0.1 --threads "$THREADS" "${prec[@]}" "${log[@]}" --json 2>/dev/null)
            ms=$(echo "$out" | field steady_ms_per_step)
            if [ "$PHASES" = 1 ]; then
                local l11
                l11=$(grep "\"step\":11,.*ms_fwd_bwd" "$WORK/phases.jsonl" | head -1)
                fb=$(echo "$l11" | field ms_fwd_bwd) opt=$(echo "$l11" | field ms_optimizer)
            fi
        else
            out=$(/usr/bin/time -f '%M' -o "$WORK/rss" env -i ANEFORGE_DATA="$PWD/data" "$AF" train $model --data mnist \
                --epochs $epochs --batch $batch --lr 0.001 --schedule constant --weight-decay 0 \
                --threads "$THREADS" "${prec[@]}" --json 2>/dev/null)
            ms=$(echo "$out" | field ms_per_step)
        fi
    else
        [ "$kind" = llama ] || [ "$mode" != bf16 ] || { echo "- - -"; return; }
        [ "$side" != debian ] || [ "$mode" != compile ] || { echo "- - -"; return; }
        local warm=1
        [ "$mode" != compile ] || warm=3
        if [ "$kind" = llama ]; then
            [ "$PHASES" != 1 ] || log=(--phases)
            out=$(/usr/bin/time -f '%M' -o "$WORK/rss" "${torch_env[@]}" "$py" bench/torch_llama.py --init "$init" \
                --data "$WORK/train.bin" --val "$val" --steps $steps --warmup $warm --batch $batch \
                --seq $seq --lr 1e-3 --weight-decay 0.1 --threads "$THREADS" --mode $mode "${log[@]}" 2>/dev/null)
            [ "$PHASES" != 1 ] || { fb=$(echo "$out" | field ms_fwd_bwd) opt=$(echo "$out" | field ms_optimizer); }
        else
            out=$(/usr/bin/time -f '%M' -o "$WORK/rss" "${torch_env[@]}" "$py" bench/torch_train.py --model $model \
                --batch $batch --epochs 1000 --steps $((tsteps + warm)) --warmup $warm --threads "$THREADS" \
                --mode $mode --time 2>/dev/null)
        fi
        ms=$(echo "$out" | field ms_per_step)
    fi
    vl=$(echo "$out" | field val_loss)
    rss=$(tail -1 "$WORK/rss")
    echo "${ms:--} $((rss / 1024)) ${vl:--} ${fb:--} ${opt:--}"
}
stats() { # "$1": values, space-separated ("-" skipped) -> "median min max" or "null null null"
    echo "$1" | tr ' ' '\n' | awk '$1 != "" && $1 != "-"' | sort -g | awk '{a[NR]=$1} END {if (!NR) {print "null null null"; exit}
        printf "%s %s %s\n", (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2, a[1], a[NR]}'
}
median() { stats "$1" | cut -d' ' -f1; }
# The median over rounds of "$1"[r] / "$2"[r] (space-separated, in round order; a round
# with "-" on either side left out): each round runs both sides within a minute, so
# this ratio follows the host's load less than the ratio of the two medians does.
paired() {
    local m
    m=$(median "$(paste -d' ' <(echo "$1" | tr ' ' '\n' | awk 'NF') <(echo "$2" | tr ' ' '\n' | awk 'NF') |
        awk '$1 != "-" && $2 != "-" && $2 > 0 {print $1 / $2}')")
    [ "$m" = null ] && echo null || printf '%.3f\n' "$m"
}

for w in $WORKLOADS; do
    kind=mnist val=
    case $w in
        mlp64|mlp128) model=mlp batch=${w#mlp} epochs=10 tsteps=$((10 * 3000 / ${w#mlp})) ;;
        cnn64|cnn128) model=cnn batch=${w#cnn} epochs=1 tsteps=$((3000 / ${w#cnn})) ;;
        llama_a) kind=llama dim=288 layers=6 heads=6 hidden=768 vocab=512 seq=256 batch=4 steps=$LLAMA_STEPS ;;
        llama_b) kind=llama dim=768 layers=1 heads=12 hidden=2048 vocab=512 seq=512 batch=1 steps=$LLAMA_STEPS ;;
        stories110m) kind=llama dim=768 layers=12 heads=12 hidden=2048 vocab=32000 seq=256 batch=1 steps=4 ;;
        *) echo "unknown workload '$w'" >&2; exit 2 ;;
    esac
    [ "$PHASES" != 1 ] || [ $kind != llama ] || steps=11
    if [ $kind = llama ]; then
        fortunes
        init=$WORK/init_$w.bin val=$WORK/val_small.bin
        [ $w != stories110m ] || val=$WORK/val_tiny.bin
        [ -s "$init" ] || "$TPY" bench/torch_llama.py --write-init "$init" --dim $dim --layers $layers --heads $heads \
            --hidden $hidden --vocab $vocab --seq $seq
    fi
    sides=($SIDES)
    declare -A ms=() rss=() vl=() fbs=() opts=()
    for ((r = 0; r < ROUNDS; r++)); do
        line="$w round $((r + 1)) (load $(cut -d' ' -f1 /proc/loadavg)):"
        for ((i = 0; i < ${#sides[@]}; i++)); do
            s=${sides[$(((i + r) % ${#sides[@]}))]}
            read -r m k v f o <<< "$(measure "$s")"
            ms[$s]+="$m "; rss[$s]+="$k "; vl[$s]+="$v "; fbs[$s]+="$f "; opts[$s]+="$o "
            line+=" $s $m ms"
        done
        echo "$line" >&2
    done
    json="{\"workload\":\"$w\",\"threads\":$THREADS,\"rounds\":$ROUNDS"
    ref=$(median "${ms[aneforge]:--}")
    for s in "${sides[@]}"; do
        read -r med lo hi <<< "$(stats "${ms[$s]}")"
        mem=$(median "${rss[$s]}")
        loss=$(median "${vl[$s]}")
        [ "$med" = null ] && continue
        json+=",\"${s}_ms\":[$med,$lo,$hi],\"${s}_rss_mib\":$mem"
        [ "$loss" = null ] || json+=",\"${s}_val_loss\":$loss"
        if [ "$s" != aneforge ] && [ "$ref" != null ]; then
            json+=",\"aneforge_over_$s\":$(printf '%.3f' "$(echo "$ref / $med" | bc -l)")"
            json+=",\"aneforge_over_${s}_paired\":$(paired "${ms[aneforge]}" "${ms[$s]}")"
        fi
        fb=$(median "${fbs[$s]}")
        op=$(median "${opts[$s]}")
        [ "$fb" = null ] || json+=",\"${s}_fwd_bwd_ms\":$fb,\"${s}_optimizer_ms\":$op"
    done
    # bf16 against our fp32 (the 0.6x target) and against PyTorch's autocast (0.7x).
    b16=$(median "${ms[aneforge_bf16]:--}")
    for s in aneforge torch_bf16; do
        med=$(median "${ms[$s]:--}")
        [ "$b16" = null ] || [ "$med" = null ] || json+=",\"aneforge_bf16_over_$s\":$(printf '%.3f' "$(echo "$b16 / $med" | bc -l)")"
    done
    if [ $kind = llama ] && [ "$ref" != null ]; then
        gflop=$("$BUILD/bench_llama_profile" $dim $layers $heads $heads $hidden $vocab $seq $batch 0 | field gflop_products)
        # The peak again, right after the rounds: on a shared machine the one measured at
        # the start can be far from what the rounds got (it gave 117% once).
        peak=$("$BUILD/bench_fma_peak" "$THREADS" 1 | field peak_gflops)
        json+=$(printf ',"gflop_per_step":%.2f,"peak_fp32_gflops_after":%s,"floor_ms":%.1f,"aneforge_pct_of_fp32_peak":%.1f,"aneforge_tokens_per_s":%.0f' \
            "$gflop" "$peak" "$(echo "1000 * $gflop / $peak" | bc -l)" "$(echo "100 * $gflop * 1000 / $ref / $peak" | bc -l)" \
            "$(echo "$batch * $seq * 1000 / $ref" | bc -l)")
        ofb=$(median "${fbs[aneforge]:--}")
        oop=$(median "${opts[aneforge]:--}")
        tms=$(median "${ms[torch]:--}")
        tfb=$(median "${fbs[torch]:--}")
        if [ "$ofb" != null ] && [ "$tfb" != null ]; then
            # Parameters with the classifier tied to the embedding (llama2.c's model.py),
            # and the memory's time for the update's 28 bytes a parameter on them.
            pm=$(echo "($vocab * $dim + $layers * (4 * $dim * $dim + 3 * $dim * $hidden + 2 * $dim) + $dim) / 1000000" | bc -l)
            upd=$("$BUILD/bench_update_rate" "$THREADS" "$(printf '%.1f' "$pm")" | field stream_ms)
            budget=$(echo "0.7 * $tms - $oop" | bc -l)
            json+=$(printf ',"params_m":%.1f,"update_memory_ms":%s,"fwd_bwd_budget_ms_at_0.7":%.1f,"aneforge_fwd_bwd_pct_of_peak":%.1f,"torch_fwd_bwd_pct_of_peak":%.1f,"needed_fwd_bwd_pct_of_peak":%.1f' \
                "$pm" "$upd" "$budget" "$(echo "100 * $gflop * 1000 / $ofb / $peak" | bc -l)" \
                "$(echo "100 * $gflop * 1000 / $tfb / $peak" | bc -l)" "$(echo "100 * $gflop * 1000 / $budget / $peak" | bc -l)")
        fi
    fi
    echo "$json,$cpu_json}"
    unset ms rss vl fbs opts
done
