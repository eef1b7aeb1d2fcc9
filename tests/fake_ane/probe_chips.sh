#!/bin/sh
# doctor --probe against the fake framework configured as three chips (the built-in A13
# and A16 files and a made-up Z9 the tests hold back): the probe must recover every limit
# it measures exactly (doctor --compare of the chip's file with the probe's: 0 differ),
# resume after an interruption, and ane-sim loaded with the probe's file must agree with
# the fake on every corpus case (test_ane_backend probed).
# usage: probe_chips.sh AF_CLI FAKE_ANE TEST_ANE_BACKEND SOURCE_DIR WORK_DIR
set -u
cli=$1 fake=$2 backend=$3 src=$4 work=$5
rm -rf "$work" && mkdir -p "$work/tmp" || exit 1
fail=0
for chip in "a13 h13 $src/src/engine/families/a13.json" "a16 h16 $src/src/engine/families/a16.json" \
            "z9 h16 $src/tests/fake_ane/families/z9.json"; do
  set -- $chip
  name=$1 sub=$2 held=$3 out="$work/$1.json"
  export TMPDIR="$work/tmp" FAKE_ANE_SUBTYPE=$sub FAKE_ANE_FAMILY=$held OPENBLAS_NUM_THREADS=1
  unset FAKE_ANE_COMPILE_BUDGET ANEFORGE_ANE_FRAMEWORK
  if ! "$cli" doctor --probe --quick -o "$out" --framework "$fake" >"$work/$name.log" 2>&1; then
    echo "$name: doctor --probe failed:"; cat "$work/$name.log"; fail=1; continue
  fi
  grep -q "15 of 15 steps measured" "$work/$name.log" || { echo "$name: a step failed"; cat "$work/$name.log"; fail=1; }
  # every elementwise op was run and compared with the CPU; on the fake they all pass
  nops=$(grep -c '"op\.' "$out") npass=$(grep -c '"op\.[a-z_]*": "pass' "$out")
  [ "$nops" -ge 31 ] && [ "$npass" = "$nops" ] || { echo "$name: $npass of $nops ops pass (want all of at least 31)"; grep '"op\.' "$out" | grep -v pass; fail=1; }
  # GEMM throughput is a measurement (never compared): it must be there and positive
  grep -q '"measured.fp16_gemm_gflops": [1-9][0-9]*,' "$out" || { echo "$name: no GEMM throughput"; grep gemm "$out"; fail=1; }
  "$cli" doctor --compare "$held" --family "$out" >"$work/$name.cmp" 2>&1
  rc=$?
  cat "$work/$name.cmp"
  if [ $rc -ne 0 ] || ! grep -q "^0 fields differ" "$work/$name.cmp"; then
    echo "$name: the probe did not recover every limit of $held"; fail=1
  fi
  # a second run keeps every finished step and compiles nothing
  "$cli" doctor --probe --quick -o "$out" --framework "$fake" >"$work/$name.again" 2>&1
  [ "$(grep -c ' kept: ' "$work/$name.again")" = 15 ] || { echo "$name: the second run did not resume"; cat "$work/$name.again"; fail=1; }
  AF_PROBED_FAMILY="$out" FAKE_ANE_COMPILE_BUDGET=100000 "$backend" probed >"$work/$name.corpus" 2>&1 || {
    echo "$name: ane-sim with the probe's file disagrees with the fake:"; tail -20 "$work/$name.corpus"; fail=1; }
  tail -2 "$work/$name.corpus"
done
# an interrupted probe resumes: drop the last steps of a finished file, probe again
out="$work/z9.json"
grep -v '"step.compile_budget"\|"step.dispatch"' "$out" | awk 'NR > 1 { if ($0 == "}") sub(/,$/, "", prev); print prev } { prev = $0 } END { print prev }' \
  >"$work/partial.json" && mv "$work/partial.json" "$out"
export FAKE_ANE_SUBTYPE=h16 FAKE_ANE_FAMILY="$src/tests/fake_ane/families/z9.json"
"$cli" doctor --probe --quick -o "$out" --framework "$fake" >"$work/resume.log" 2>&1
kept=$(grep -c ' kept: ' "$work/resume.log")
[ "$kept" = 13 ] && grep -q "^0 fields differ" "$work/z9.cmp" || { echo "resume: kept $kept of 13 steps"; cat "$work/resume.log"; fail=1; }
[ $fail = 0 ] && echo "probe_chips: all three chips recovered" || echo "probe_chips: FAILED"
exit $fail
