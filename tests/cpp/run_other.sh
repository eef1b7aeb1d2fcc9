#!/bin/sh
# Builds tests/cpp/test_cpp_api.cpp with the C++ compilers on PATH that CMake did not
# use (g++ and clang++), against the header and the shared library, and runs it. Exits
# 77 (ctest: skipped) when there is no other compiler, or under the sanitizers.
# usage: run_other.sh SOURCE_DIR SHARED_LIBRARY CMAKE_CXX_COMPILER_ID SANITIZE(ON|OFF)
set -eu
src=$1 lib=$2 used=$3 sanitize=$4
if [ "$sanitize" = ON ]; then
    # The library's sanitizer runtime belongs to its own compiler; mixing is not a test.
    echo "cpp_api_other: SKIPPED under AF_SANITIZE (cpp_api covers the header with $used)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ran=0
for cxx in g++ clang++; do
    command -v "$cxx" >/dev/null 2>&1 || { echo "cpp_api_other: $cxx not found, skipped"; continue; }
    case "$cxx/$used" in g++/GNU | clang++/Clang) echo "cpp_api_other: $cxx is CMake's compiler (cpp_api)"; continue ;; esac
    "$cxx" -std=c++11 -Wall -Wextra -pedantic-errors -Werror -I"$src/include" "$src/tests/cpp/test_cpp_api.cpp" \
        "$lib" -Wl,-rpath,"$(dirname "$lib")" -o "$work/test_cpp_api_$cxx"
    "$work/test_cpp_api_$cxx"
    ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
    echo "cpp_api_other: SKIPPED: no C++ compiler other than CMake's ($used) on PATH (apt-get install clang or g++)"
    exit 77
fi
echo "cpp_api_other: $ran other C++ compiler(s) built and ran the header test"
