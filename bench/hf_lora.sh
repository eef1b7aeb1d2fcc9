#!/bin/sh
# LoRA fine-tuning of a Qwen3-0.6B-shaped model (random weights made by transformers:
# bench/hf_lora_make.py) on the CPU, aneforge against PyTorch + peft (bench/hf_lora_torch.py)
# at the same threads, batch, seq and LoRA (rank 8, alpha 16, all seven projections).
# Rounds alternate the two; each run's ms/step is the median of its steps after the
# first, the figure is the median over rounds; peak memory is the process's max RSS
# (/usr/bin/time), frozen base weights and all. Each step's process CPU time (all its
# threads) is reported beside the wall time: on a shared machine it is the steadier one.
# PREC bf16: aneforge --precision bf16 (products in bf16 with fp32 sums: AMX or
# AVX512-BF16) against PyTorch under torch.autocast("cpu", bfloat16).
# LAYERS below 28 makes a smaller model of the same widths (a quick check; its own folder).
# usage: bench/hf_lora.sh BUILD PYTHON WORKDIR [ROUNDS STEPS BATCH SEQ THREADS [PREC [LAYERS]]]
set -eu
bin=$1/aneforge py=$2 w=$3 rounds=${4:-3} steps=${5:-4} B=${6:-1} T=${7:-64} th=${8:-2} prec=${9:-fp32} layers=${10:-28}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$w"
model=$w/qwen3; [ "$layers" = 28 ] || model=$w/qwen3-$layers
[ -f "$model/config.json" ] || "$py" "$here/hf_lora_make.py" "$model" "$layers"
# token ids below the vocab, uniform (the model is random: text would teach nothing more)
[ -f "$w/ids.bin" ] || "$py" -c "import numpy as np; np.random.default_rng(1).integers(0, 65536, 200000, dtype=np.uint16).tofile('$w/ids.bin')"
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
: >"$w/af.txt"; : >"$w/pt.txt"
for r in $(seq "$rounds"); do
    /usr/bin/time -f 'rss_kb %M' "$bin" hf train "$model" --data "$w/ids.bin" --steps "$steps" --batch "$B" \
        --seq "$T" --threads "$th" --precision "$prec" --lora-rank 8 --lora-alpha 16 --lora-targets all \
        -o "$w/adapter" 2>"$w/af.log"
    OMP_WAIT_POLICY=PASSIVE /usr/bin/time -f 'rss_kb %M' "$py" "$here/hf_lora_torch.py" "$model" "$w/ids.bin" \
        "$steps" "$B" "$T" "$th" 8 "$prec" >"$w/pt.log" 2>"$w/pt.err"
    af=$(grep '^step' "$w/af.log" | tail -n +2 | awk '{print $6}' | med); afm=$(awk '/^rss_kb/ {print $2}' "$w/af.log")
    pt=$(tail -n +2 "$w/pt.log" | awk '{print $6}' | med); ptm=$(awk '/^rss_kb/ {print $2}' "$w/pt.err")
    afc=$(grep '^step' "$w/af.log" | tail -n +2 | awk '{print $8}' | med); ptc=$(tail -n +2 "$w/pt.log" | awk '{print $8}' | med)
    echo "$af $afm $afc" >>"$w/af.txt"; echo "$pt $ptm $ptc" >>"$w/pt.txt"
    echo "round $r: aneforge $af ms/step ($afc ms CPU), $((afm / 1024)) MiB; pytorch+peft $pt ms/step ($ptc ms CPU), $((ptm / 1024)) MiB"
done
a=$(awk '{print $1}' "$w/af.txt" | med); p=$(awk '{print $1}' "$w/pt.txt" | med)
am=$(awk '{print $2}' "$w/af.txt" | med); pm=$(awk '{print $2}' "$w/pt.txt" | med)
ac=$(awk '{print $3}' "$w/af.txt" | med); pc=$(awk '{print $3}' "$w/pt.txt" | med)
echo "median ($prec): aneforge $a ms/step ($ac ms CPU), peak $((${am%.*} / 1024)) MiB; pytorch+peft $p ms/step ($pc ms CPU), peak $((${pm%.*} / 1024)) MiB; ratio $(awk "BEGIN {printf \"%.2f\", $a / $p}") wall, $(awk "BEGIN {printf \"%.2f\", $ac / $pc}") CPU"
