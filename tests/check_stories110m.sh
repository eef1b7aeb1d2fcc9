#!/bin/sh
# Seed 002's model, stories110m (12 layers, dim 768: 110 parameter tensors, more than the
# trainer's old fixed table of 64), trains 2 steps from the CLI on the host plan (CPU)
# and on the pipeline plan (ane-sim:m4). The first loss of an untrained model is near
# ln(vocab) = ln 259 = 5.557 on any plan; both runs must report finite, close losses.
set -u
cli=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$cli" tokenizer bytes -o "$tmp/tok.bin" >/dev/null || exit 1
i=0; while [ $i -lt 100 ]; do printf 'Once upon a time there was a little model that learned to read. '; i=$((i+1)); done >"$tmp/t.txt"
"$cli" data tokenize --tokenizer "$tmp/tok.bin" --sep '' "$tmp/t.txt" -o "$tmp/t.tokens" >/dev/null || exit 1
fail=0
for run in "--target cpu --plan host" "--target ane-sim:m4 --plan pipeline"; do
    # shellcheck disable=SC2086
    out=$("$cli" train llama --config stories110m --tokenizer "$tmp/tok.bin" --data "$tmp/t.tokens" \
          --steps 2 --batch 1 --seq 16 --json $run 2>"$tmp/err") || { echo "FAIL ($run): $(tail -1 "$tmp/err")"; fail=1; continue; }
    line=$(echo "$out" | tail -1)
    python3 - "$line" "$run" <<'PY' || fail=1
import json, math, sys
r = json.loads(sys.argv[1])
loss, steps = r["train_loss"], r["steps"]
ok = steps == 2 and loss is not None and math.isfinite(loss) and abs(loss - math.log(259)) < 0.5
print(("ok" if ok else "FAIL"), sys.argv[2], "steps", steps, "train_loss", loss)
sys.exit(0 if ok else 1)
PY
done
[ $fail -eq 0 ] && echo "stories110m_cli: 2 passed, 0 failed" || { echo "stories110m_cli: failed"; exit 1; }
