#!/bin/sh
# LoRA fine-tuning of a Qwen3-0.6B-shaped model (random weights made by transformers:
# bench/hf_lora_make.py) on the CPU, aneforge against PyTorch + peft (bench/hf_lora_torch.py)
# at the same threads, batch, seq and LoRA (rank 8, alpha 16, all seven projections).
# Rounds alternate the two; each run's ms/step is the median of its steps after the
# first, the figure is the median over rounds; peak memory is the process's max RSS
# (/usr/bin/time), frozen base weights and all.
# usage: bench/hf_lora.sh BUILD PYTHON WORKDIR [ROUNDS STEPS BATCH SEQ THREADS]
set -eu
bin=$1/aneforge py=$2 w=$3 rounds=${4:-3} steps=${5:-4} B=${6:-1} T=${7:-64} th=${8:-2}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$w"
[ -f "$w/qwen3/config.json" ] || "$py" "$here/hf_lora_make.py" "$w/qwen3"
# token ids below the vocab, uniform (the model is random: text would teach nothing more)
[ -f "$w/ids.bin" ] || "$py" -c "import numpy as np; np.random.default_rng(1).integers(0, 65536, 200000, dtype=np.uint16).tofile('$w/ids.bin')"
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
: >"$w/af.txt"; : >"$w/pt.txt"
for r in $(seq "$rounds"); do
    /usr/bin/time -f 'rss_kb %M' "$bin" hf train "$w/qwen3" --data "$w/ids.bin" --steps "$steps" --batch "$B" \
        --seq "$T" --threads "$th" --lora-rank 8 --lora-alpha 16 --lora-targets all -o "$w/adapter" 2>"$w/af.log"
    OMP_WAIT_POLICY=PASSIVE /usr/bin/time -f 'rss_kb %M' "$py" "$here/hf_lora_torch.py" "$w/qwen3" "$w/ids.bin" \
        "$steps" "$B" "$T" "$th" 8 >"$w/pt.log" 2>"$w/pt.err"
    af=$(grep '^step' "$w/af.log" | tail -n +2 | awk '{print $6}' | med); afm=$(awk '/^rss_kb/ {print $2}' "$w/af.log")
    pt=$(tail -n +2 "$w/pt.log" | awk '{print $6}' | med); ptm=$(awk '/^rss_kb/ {print $2}' "$w/pt.err")
    echo "$af $afm" >>"$w/af.txt"; echo "$pt $ptm" >>"$w/pt.txt"
    echo "round $r: aneforge $af ms/step, $((afm / 1024)) MiB; pytorch+peft $pt ms/step, $((ptm / 1024)) MiB"
done
a=$(awk '{print $1}' "$w/af.txt" | med); p=$(awk '{print $1}' "$w/pt.txt" | med)
am=$(awk '{print $2}' "$w/af.txt" | med); pm=$(awk '{print $2}' "$w/pt.txt" | med)
echo "median: aneforge $a ms/step, peak $((${am%.*} / 1024)) MiB; pytorch+peft $p ms/step, peak $((${pm%.*} / 1024)) MiB; ratio $(awk "BEGIN {printf \"%.2f\", $a / $p}")"
