#!/bin/sh
# The library must build on arm64 (macOS with Apple clang, Linux): everything outside
# src/ane/darwin/ is portable C, with x86 code behind its own #if. This compiles every
# portable source file for aarch64 (Debian's cross gcc, or clang with the cross sysroot),
# with the warnings the build uses, so x86-only names used outside their #if fail here
# (gemm_bf16.c's packer type did, unnoticed, until this check). zlib.h and cJSON.h are
# copied from the host: they are the same on every architecture. Exit 77 (skipped) when
# no aarch64 compiler is installed; .ci/run installs one.
#   tests/check_arm64_compile.sh <source dir> <build dir>
root=$1; build=$2
sysroot=/usr/aarch64-linux-gnu
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    cc="aarch64-linux-gnu-gcc"; extra="-fopenmp-simd"
elif command -v clang >/dev/null 2>&1 && [ -f "$sysroot/include/stdio.h" ]; then
    cc="clang --target=aarch64-linux-gnu --sysroot=$sysroot"; extra="-fopenmp-simd"
else
    echo "arm64_compile: no aarch64 compiler (gcc-aarch64-linux-gnu, or clang with libc6-dev-arm64-cross): skipped"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/cjson"
cp /usr/include/zlib.h /usr/include/zconf.h "$tmp/" 2>/dev/null
cp /usr/include/cjson/cJSON.h "$tmp/cjson/" 2>/dev/null
bad=0; n=0
for f in $(find "$root/src" -name '*.c' -not -path '*/darwin/*' | sort); do
    n=$((n + 1))
    if ! $cc -std=c11 -Wall -Wextra -Werror $extra -fsyntax-only -I"$root/include" -I"$root/src" \
            -I"$build/generated" -I"$tmp" "$f" > "$tmp/out.txt" 2>&1; then
        echo "${f#$root/} does not compile for aarch64:"; head -5 "$tmp/out.txt"
        bad=$((bad + 1))
    fi
done
[ "$bad" -eq 0 ] || { echo "arm64_compile: $bad of $n files failed ($cc)"; exit 1; }
echo "arm64_compile: $n files compile for aarch64 ($cc)"
