#!/bin/sh
# A switch over one kind's ops that lists the other kinds' ops through op_cases.h has no
# default, so leaving out one of the kind's ops is a compile error naming it
# (-Werror=switch): the check behind "a new op without its case does not compile"
# (ARCHITECTURE.md, "Adding an op"). Compiles a rank-kind switch whole, then without
# global_arg_min_max's case.
root=$1; cc=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/sw.c" <<'C'
#include "ir/ir.h"
#include "ir/op_cases.h"
int rank_case(ir_op op);
int rank_case(ir_op op) {
    switch (op) {
    case IR_OP_SORT: case IR_OP_TOPK: case IR_OP_ARGMINMAX:
#ifndef DROP
    case IR_OP_GLOBAL_ARGMINMAX:
#endif
        return 1;
#define X(id, name, arity, kind, ...) IR_CASE_UNLESS_KIND(kind, RANK, id)
#include "ir/ops.def"
#undef X
        return 0;
    }
    return -1;
}
C
flags="-std=c11 -Wall -Wextra -pedantic -Werror=switch -fsyntax-only -I$root/include -I$root/src"
if ! "$cc" $flags "$tmp/sw.c" 2> "$tmp/whole.txt"; then
    echo "the whole switch does not compile:"; cat "$tmp/whole.txt"; exit 1
fi
if "$cc" $flags -DDROP "$tmp/sw.c" 2> "$tmp/drop.txt"; then
    echo "a switch missing IR_OP_GLOBAL_ARGMINMAX compiled: op_cases.h lists the kind's own ops"; exit 1
fi
if ! grep -q "IR_OP_GLOBAL_ARGMINMAX" "$tmp/drop.txt"; then
    echo "the compile error does not name the missing op:"; cat "$tmp/drop.txt"; exit 1
fi
echo "op_cases: a missing case fails to compile, naming IR_OP_GLOBAL_ARGMINMAX"
