#!/bin/sh
# The shared library exports exactly the functions the public headers (include/aneforge*.h) declare with AF_API: nothing internal leaks,
# nothing public is missing.
# usage: check_exports.sh INCLUDE_DIR SHARED_LIBRARY
set -eu
dir=$1 lib=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
header="$dir/aneforge*.h"
sed -n 's/^AF_API .*[ *]\(af_[a-z0-9_]*\)[ \t]*(.*/\1/p' $dir/aneforge*.h | sort -u >"$tmp/declared"
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
echo "exports: the shared library exports exactly the $n functions the headers declare"
