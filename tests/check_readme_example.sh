#!/bin/sh
# README's C example must keep compiling and printing what README shows: extracts the
# first ```c block of README.md, compiles it against the built shared library with
# warnings as errors, runs it, and compares its output with the first fenced block after
# it (minus that block's "$ ..." command line). Numbers may differ by 2e-3 (the last
# digit of an fp16 fit), words not at all.
# usage: check_readme_example.sh SOURCE_DIR SHARED_LIB C_COMPILER
set -eu
src=$1 lib=$2 cc=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

awk '
    state == 0 && /^```c[ \t]*$/ { state = 1; next }
    state == 1 && /^```[ \t]*$/  { state = 2; next }
    state == 1 { print > "'"$work"'/example.c"; next }
    state == 2 && /^```/ { state = 3; next }
    state == 3 && /^```[ \t]*$/  { exit }
    state == 3 && /^\$ / { next }
    state == 3 { print > "'"$work"'/expected.txt" }
' "$src/README.md"

if [ ! -s "$work/example.c" ]; then
    echo "readme_example: README.md has no \`\`\`c block"; exit 1
fi
if [ ! -s "$work/expected.txt" ]; then
    echo "readme_example: README.md shows no output block after its \`\`\`c block"; exit 1
fi

libdir=$(dirname "$lib")
$cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$src/include" -o "$work/example" \
    "$work/example.c" "$lib" -lm -Wl,-rpath,"$libdir"
"$work/example" > "$work/actual.txt"

# Word by word: numbers within 2e-3, everything else equal.
if ! awk '
    NR == FNR { want[FNR] = $0; nwant = FNR; next }
    {
        nact = FNR
        ne = split(want[FNR], e, /[ \t]+/); na = split($0, a, /[ \t]+/)
        if (ne != na) { bad = 1; next }
        for (i = 1; i <= ne; i++) {
            if (e[i] == a[i]) continue
            if (e[i] ~ /^-?[0-9.]+$/ && a[i] ~ /^-?[0-9.]+$/ && (e[i] - a[i] < 2e-3 && a[i] - e[i] < 2e-3)) continue
            bad = 1
        }
    }
    END { exit (bad || nact != nwant) ? 1 : 0 }
' "$work/expected.txt" "$work/actual.txt"; then
    echo "readme_example: the program's output differs from what README.md shows"
    echo "--- README.md shows:"; cat "$work/expected.txt"
    echo "--- the program prints:"; cat "$work/actual.txt"
    exit 1
fi
echo "readme_example: README's C example compiles (-Werror) and prints what README shows:"
cat "$work/actual.txt"
