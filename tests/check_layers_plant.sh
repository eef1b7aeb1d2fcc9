#!/bin/sh
# The layering check must see a call that goes up a layer through the public header
# (the include lines show nothing wrong): a file of src/ir calling af_causal_mask, which
# src/nn defines, is planted as an object and must fail the check by name.
set -u
src=$1 obj=$2 cc=${3:-cc}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/planted.c" <<'C'
#include "aneforge.h"
af_tensor *planted_mask(af_tensor *s) { return af_causal_mask(s, 0); }
C
"$cc" -c -I"$src/include" "$tmp/planted.c" -o "$tmp/planted.o" || { echo "could not compile the planted file"; exit 1; }
out=$(python3 "$src/tests/check_layers.py" "$src" "$obj" --plant "ir=$tmp/planted.o")
rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: the planted upward call passed the check (exit $rc)"; exit 1; }
echo "$out" | grep -q "planted in src/ir) (ir) calls af_causal_mask, defined in src/nn/transformer.c (nn), a layer above" \
    || { echo "FAIL: the check failed without naming the planted call"; exit 1; }
# The same object planted in src/train (above nn) is allowed.
python3 "$src/tests/check_layers.py" "$src" "$obj" --plant "train=$tmp/planted.o" >/dev/null \
    || { echo "FAIL: a call down the layers was refused"; exit 1; }
echo "layering_plant: the planted upward call was caught"
