#!/bin/sh
# Installs the build into a temporary prefix and builds an outside program against it
# three ways: pkg-config, find_package (shared and static) and add_subdirectory.
# Exits 77 (ctest: skipped) when pkg-config is missing, after checking the other ways.
# usage: run.sh SOURCE_DIR BUILD_DIR C_COMPILER
set -eu
src=$1 build=$2 cc=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*)
test -f "$work/prefix/include/aneforge.h"
ls "$libdir"/libaneforge.so.0 "$libdir"/libaneforge.a >/dev/null

# pkg-config
pc=1
if command -v pkg-config >/dev/null; then
    PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --modversion aneforge
    $cc -o "$work/consumer_pc" "$src/tests/consumer/consumer.c" \
        $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs aneforge) -lm -Wl,-rpath,"$libdir"
    "$work/consumer_pc"
else
    pc=0
fi

# find_package
cmake -S "$src/tests/consumer" -B "$work/fp" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$work/fp" -j 2 >/dev/null
"$work/fp/consumer_shared"
"$work/fp/consumer_static"

# add_subdirectory (library only: a parent build gets no tests)
cmake -S "$src/tests/consumer/parent" -B "$work/sub" -DCMAKE_C_COMPILER="$cc" -DANEFORGE_SOURCE="$src" \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$work/sub" -j 2 --target consumer_sub >/dev/null
"$work/sub/consumer_sub"
# The installed CLI finds the MNIST copy installed next to it (share/aneforge/mnist),
# from a directory with no data of its own.
(cd "$work" && "$work/prefix/bin/aneforge" data info) > "$work/info.txt"
grep -q "mnist *ok: 4 files verified in $work/prefix/bin/../share/aneforge/mnist" "$work/info.txt" ||
    { cat "$work/info.txt"; echo "consumer: the installed aneforge does not find the installed MNIST"; exit 1; }

if [ $pc = 0 ]; then
    echo "consumer: SKIPPED: pkg-config is not installed (apt-get install pkg-config), so that way is not checked;"
    echo "          find_package (shared, static) and add_subdirectory build and run"
    exit 77
fi
echo "consumer: pkg-config, find_package (shared, static) and add_subdirectory all build and run"
