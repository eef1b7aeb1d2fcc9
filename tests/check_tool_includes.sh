#!/bin/sh
# tools/ (the aneforge CLI) is a user of the public API only: every quoted #include in
# tools/*.c and tools/*.h must name a public header (include/) or one of tools/' own
# files, never a library internal (src/...). With --plant, checks that the check itself
# catches such an include: a copy of tools/ with one planted file must fail, by name.
# usage: check_tool_includes.sh SOURCE_DIR [--plant]
set -u
src=$1

check() { # TOOLS_DIR INCLUDE_DIR: prints each bad include, exit 1 if any
    bad=0
    for f in "$1"/*.c "$1"/*.h; do
        [ -f "$f" ] || continue
        for h in $(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f"); do
            if [ ! -f "$2/$h" ] && [ ! -f "$1/$h" ]; then
                echo "tools/$(basename "$f") includes \"$h\", which is not a public header (include/) nor a file of tools/:" \
                     "give the library a public call (AF_API, in include/) for what it needs, or move the logic into tools/"
                bad=1
            fi
        done
    done
    return $bad
}

if [ "${2:-}" = --plant ]; then
    tmp=$(mktemp -d) || exit 1
    trap 'rm -rf "$tmp"' EXIT
    cp "$src"/tools/*.c "$src"/tools/*.h "$tmp"/
    printf '#include "aneforge.h"\n#include "ir/ir.h"\nint planted(void) { return 0; }\n' >"$tmp/planted.c"
    out=$(check "$tmp" "$src/include")
    rc=$?
    echo "$out"
    [ $rc -eq 1 ] || { echo "FAIL: a planted #include \"ir/ir.h\" in tools/ passed the check"; exit 1; }
    echo "$out" | grep -q 'tools/planted.c includes "ir/ir.h"' || { echo "FAIL: the check did not name the planted include"; exit 1; }
    [ "$(echo "$out" | wc -l)" -eq 1 ] || { echo "FAIL: the check flagged more than the planted include"; exit 1; }
    echo "tool_includes_plant: the planted internal include was caught"
    exit 0
fi

check "$src/tools" "$src/include" || exit 1
echo "tool_includes: tools/ includes only public headers and its own files"
