#!/bin/sh
# `aneforge train --target ane` on Linux, the shortened CI form of the full MNIST run:
# the MLP (resident plan, 5 epochs) and the CNN (host and resident plans, 1 epoch) on the
# shipped MNIST subset, through the darwin runtime and the fake framework (reporting an
# M1, h13), against ane-sim:m1. The fake runs what it compiles as ane-sim models the
# engine, so accuracy and loss must be equal, not just close.
# usage: cli_train_ane.sh CLI FAKE_FRAMEWORK SOURCE_DIR WORK_DIR
set -eu
cli=$1 fake=$2 src=$3 work=$4
mkdir -p "$work/data" "$work/tmp"
ln -sfn "$src/tests/data/mnist-subset" "$work/data/mnist"
export ANEFORGE_DATA="$work/data" TMPDIR="$work/tmp" ANEFORGE_ANE_FRAMEWORK="$fake"  # the fake is an M1 (h13) unless told otherwise
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"]*\).*/\1/p" "$2"; }
fail=0
run() { # model epochs plan min_acc max_dispatches
    for t in ane:m1 ane-sim:m1; do
        "$cli" train "$1" --data mnist --epochs "$2" --plan "$3" --target "$t" --json >"$work/$t.json" 2>"$work/$t.err" ||
            { echo "FAIL: $1 $3 on $t exited non-zero:"; cat "$work/$t.err"; fail=1; return; }
    done
    a=$(field test_acc "$work/ane:m1.json") b=$(field test_acc "$work/ane-sim:m1.json")
    la=$(field train_loss "$work/ane:m1.json") lb=$(field train_loss "$work/ane-sim:m1.json")
    d=$(field dispatches_per_step "$work/ane:m1.json") c=$(field programs_compiled "$work/ane:m1.json")
    tgt=$(field target "$work/ane:m1.json")
    echo "$1 $3: ane accuracy $a loss $la ($tgt, $d dispatches/step, $c programs); ane-sim accuracy $b loss $lb"
    [ "$tgt" = "ane:A13" ] || { echo "FAIL: target reported as $tgt"; fail=1; }
    [ "$a" = "$b" ] && [ "$la" = "$lb" ] || { echo "FAIL: $1 $3: ane and ane-sim differ"; fail=1; }
    awk -v a="$a" -v m="$4" 'BEGIN { exit !(a >= m) }' || { echo "FAIL: $1 $3: accuracy $a < $4"; fail=1; }
    awk -v d="$d" -v m="$5" 'BEGIN { exit !(d <= m) }' || { echo "FAIL: $1 $3: $d dispatches per step > $5"; fail=1; }
    [ "$c" -le 8 ] || { echo "FAIL: $1 $3: $c programs compiled"; fail=1; }
}
run mlp 5 resident 0.90 1
n=1
if [ "${AF_CLI_TRAIN_QUICK:-0}" != 1 ]; then
    run cnn 1 resident 0.80 1
    run cnn 1 host 0.80 7
    n=3
fi
[ $fail -eq 0 ] && echo "cli_train_ane: $n passed, 0 failed" || echo "cli_train_ane: failures above"
exit $fail
