#!/bin/sh
# Fine-tuning a Hugging Face model on the fortunes (docs/results.md, "Hugging Face models
# on the fortunes"): a small Qwen3-style model made by transformers (random weights,
# seed 0) fully fine-tuned, then that model LoRA-tuned (rank 8, all seven projections),
# each writing a folder transformers loads (LoRA: a PEFT adapter folder).
# usage: bench/hf_fortunes.sh BUILD PYTHON WORKDIR   (PYTHON with torch and transformers)
set -eu
bin=$1/aneforge py=$2 w=$3
mkdir -p "$w"
"$bin" data fetch text --dir "$w/data" >/dev/null
"$bin" tokenizer train --vocab 512 "$w/data/text/train.txt" -o "$w/tok.bin" >/dev/null
"$bin" data tokenize --tokenizer "$w/tok.bin" "$w/data/text/train.txt" -o "$w/train.bin" >/dev/null
"$py" - "$w/qwen3" <<'PY'
import sys, torch, transformers
torch.manual_seed(0)
c = transformers.Qwen3Config(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256)
transformers.Qwen3ForCausalLM(c).save_pretrained(sys.argv[1])
PY
common="--data $w/train.bin --steps 300 --seq 128 --batch 8 --threads 2"
"$bin" hf train "$w/qwen3" $common --lr 2e-3 -o "$w/full" 2>"$w/full.log"
"$bin" hf train "$w/full" $common --lr 5e-3 --lora-rank 8 --lora-alpha 16 --lora-targets all -o "$w/lora" 2>"$w/lora.log"
for r in full lora; do
    printf '%s: ' $r; grep '^step' "$w/$r.log" | awk '{n++; l[n]=$4} END {a=0; b=0; for (i=1;i<=10;i++) {a+=l[i]; b+=l[n-10+i]} printf "mean loss of steps 1-10 %.3f, of the last 10 %.3f\n", a/10, b/10}'
done
