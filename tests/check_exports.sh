#!/bin/sh
# The shared library exports exactly the functions the public headers (include/*.h)
# declare with AF_API: nothing internal leaks, nothing public is missing.
# usage: check_exports.sh HEADER... SHARED_LIBRARY
set -eu
headers=
while [ $# -gt 1 ]; do headers="$headers $1"; shift; done
header=$headers lib=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the headers named, and every companion beside the first (aneforge_hf.h, ...)
first=${headers# }; first=${first%% *}
set --
for h in $headers "$(dirname "$first")"/aneforge_*.h; do [ -f "$h" ] && set -- "$@" "$h"; done
sed -n 's/^AF_API .*[ *]\(af_[a-z0-9_]*\)[ \t]*(.*/\1/p' "$@" | sort -u >"$tmp/declared"
if [ "$(uname)" = Darwin ]; then
    nm -gU "$lib" | awk '{print $3}' | sed 's/^_//' | sort -u >"$tmp/exported"
else
    # clang 14 gives every static target_clones function (CPU_VECTOR_CLONES) a global
    # "NAME.resolver"; a name with a dot is no C symbol anyone can link against
    nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/ && $3 !~ /\.resolver$/ {print $3}' | sort -u >"$tmp/exported"
fi
n=$(wc -l <"$tmp/declared")
[ "$n" -gt 100 ] || { echo "only $n AF_API declarations found in $header"; exit 1; }
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
[ -z "$extra" ] || { echo "exported but not declared in the header:"; echo "$extra"; }
[ -z "$missing" ] || { echo "declared but not exported:"; echo "$missing"; }
[ -z "$extra$missing" ] || exit 1
echo "exports: the shared library exports exactly the $n functions the header declares"
