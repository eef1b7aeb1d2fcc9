#!/bin/sh
# llama2.c's run.c against aneforge: trains a tiny model on this repository's README and
# ARCHITECTURE (a BPE vocabulary of 320 learnt from them), exports it with `aneforge
# export` and checks that run.c and `aneforge generate` print the same text for several
# prompts, greedy (temperature 0) and sampled (run.c's sampler, same seed). run.c does
# not print a raw-byte token that is neither printable nor whitespace (its safe_printf),
# aneforge prints its byte; both texts are compared with such bytes removed.
# run.c is not part of aneforge: build it yourself and point AF_RUNC at the binary,
#   git clone https://github.com/karpathy/llama2.c && cc -O2 -o run llama2.c/run.c -lm
#   AF_RUNC=$PWD/run ctest -R runc_crosscheck
# Without AF_RUNC the test exits 77, which ctest reports as skipped.
#   usage: runc_crosscheck.sh AF_BINARY SOURCE_DIR
set -eu
AF=$1
SRC=$2
if [ -z "${AF_RUNC:-}" ]; then
    echo "runc_crosscheck: SKIPPED: set AF_RUNC to a llama2.c run.c binary to compare with it"
    exit 77
fi
[ -x "$AF_RUNC" ] || { echo "runc_crosscheck: AF_RUNC=$AF_RUNC is not an executable"; exit 1; }
dir=$(mktemp -d /tmp/af_runc.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat "$SRC/README.md" "$SRC/ARCHITECTURE.md" > "$dir/text.txt"
"$AF" tokenizer train --vocab 320 "$dir/text.txt" -o "$dir/tok.bin" 2>/dev/null
"$AF" data tokenize --tokenizer "$dir/tok.bin" "$dir/text.txt" -o "$dir/tokens.bin" 2>/dev/null
"$AF" train llama --config tiny --tokenizer "$dir/tok.bin" --data "$dir/tokens.bin" --steps 60 --batch 8 --seq 64 \
    --lr 0.003 --seed 3 --save "$dir/run.ckpt" 2>/dev/null
"$AF" export --ckpt "$dir/run.ckpt" -o "$dir/model.bin" 2>/dev/null
fail=0
n=0
for prompt in "The model" "aneforge trains" "A" "Each op has a kernel"; do
    for mode in "0 0.9 1" "0.9 0.9 42" "1.0 0 7"; do
        set -- $mode
        "$AF_RUNC" "$dir/model.bin" -z "$dir/tok.bin" -t "$1" -p "$2" -s "$3" -n 100 -i "$prompt" > "$dir/runc.txt" 2>/dev/null
        "$AF" generate --model "$dir/model.bin" --tokenizer "$dir/tok.bin" --prompt "$prompt" --steps 100 \
            --temperature "$1" --top-p "$2" --seed "$3" > "$dir/ours.txt"
        n=$((n + 1))
        tr -cd '\11\12\15\40-\176' < "$dir/runc.txt" > "$dir/runc.asc"
        tr -cd '\11\12\15\40-\176' < "$dir/ours.txt" > "$dir/ours.asc"
        if ! cmp -s "$dir/runc.asc" "$dir/ours.asc"; then
            echo "runc_crosscheck: prompt '$prompt', temperature $1, top-p $2, seed $3: run.c and aneforge differ"
            echo "  run.c:    $(head -c 300 "$dir/runc.txt")"
            echo "  aneforge: $(head -c 300 "$dir/ours.txt")"
            fail=1
        fi
    done
done
echo "runc_crosscheck: $n generations compared: $([ $fail = 0 ] && echo identical || echo DIFFERENT)"
echo "  e.g. $(head -c 200 "$dir/ours.txt")"
exit $fail
