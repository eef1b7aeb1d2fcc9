#!/bin/sh
# doctor --probe against the fake framework configured as four chips (the built-in A13,
# A16 and H17 files, H17 for M5's 128-byte surfaces, and a made-up Z9 the tests hold back): the probe must recover every limit
# it measures exactly (doctor --compare of the chip's file with the probe's: 0 differ),
# resume after an interruption, and ane-sim loaded with the probe's file must agree with
# the fake on every corpus case (test_ane_backend probed).
# usage: probe_chips.sh AF_CLI FAKE_ANE TEST_ANE_BACKEND SOURCE_DIR WORK_DIR
set -u
cli=$1 fake=$2 backend=$3 src=$4 work=$5
rm -rf "$work" && mkdir -p "$work/tmp" || exit 1
fail=0
# each chip on one of the fake's macOS profiles (14: no in-memory compile selector; 26: an
# in-memory compile that fails): the probe records the compile entry point that worked
for chip in "a13 h13 $src/src/engine/families/a13.json 14 _ANEClient" "a16 h16 $src/src/engine/families/a16.json 15 _ANEInMemoryModel" \
            "h17 h17 $src/src/engine/families/h17.json 26 _ANEClient" "z9 h16 $src/tests/fake_ane/families/z9.json 15 _ANEInMemoryModel"; do
  set -- $chip
  name=$1 sub=$2 held=$3 out="$work/$1.json" entry=$5
  export TMPDIR="$work/tmp" FAKE_ANE_SUBTYPE=$sub FAKE_ANE_FAMILY=$held FAKE_ANE_MACOS=$4 OPENBLAS_NUM_THREADS=1
  unset FAKE_ANE_COMPILE_BUDGET ANEFORGE_ANE_FRAMEWORK
  if ! "$cli" doctor --probe --quick -o "$out" --framework "$fake" >"$work/$name.log" 2>&1; then
    echo "$name: doctor --probe failed:"; cat "$work/$name.log"; fail=1; continue
  fi
  grep -q "15 of 15 steps measured" "$work/$name.log" || { echo "$name: a step failed"; cat "$work/$name.log"; fail=1; }
  # every row of the op table has its verdict, none silently missing, and the fake gives
  # the chip's table: the CPU-only rows named, embedding_grad refused (no scatter), the
  # last-axis slice of 5000s wrong where the crop DMA saturates (a13, z9), all else pass
  rows=$("$cli" ops --json | sed -n 's/^  {"name": "\([a-z0-9_]*\)".*/\1/p')
  nrows=$(echo "$rows" | wc -l) nops=$(grep -c '"op\.' "$out") missing=""
  for op in $rows; do grep -q "^  \"op\.$op\": \"" "$out" || missing="$missing $op"; done
  verdicts() { sed -n "s/^  \"op\.\([a-z0-9_]*\)\": \"$1.*/\1/p" "$out" | tr '\n' ' '; }
  ncpu=$("$cli" ops --json | grep -c '"mil": "none: CPU only"')
  case $name in a13|z9) want_wrong="slice_by_size " ;; *) want_wrong="" ;; esac
  npass=$(verdicts pass | wc -w) want_pass=$((nrows - ncpu - 1 - $(echo $want_wrong | wc -w)))
  if [ "$nrows" -lt 90 ] || [ "$nops" != "$nrows" ] || [ -n "$missing" ] || [ "$(verdicts cpu-only | wc -w)" != "$ncpu" ] ||
     [ "$(verdicts refused)" != "embedding_grad " ] || [ "$(verdicts wrong)" != "$want_wrong" ] || [ "$npass" != "$want_pass" ]; then
    echo "$name: $nops verdicts for the op table's $nrows rows (missing:${missing:- none}); refused: $(verdicts refused);" \
         "wrong: $(verdicts wrong) (want $want_wrong); $npass pass (want $want_pass)"; grep '"op\.' "$out" | grep -v '"pass'; fail=1
  fi
  # every unverified net.plist spelling tried, each accepted by the fake (its compiler reads them all)
  nsp=$(grep -c '^SPELLING(.*UNVERIFIED' "$src/src/netplist/bridge_spellings.def") nacc=$(grep -c '"spelling\..*": "accepted' "$out")
  [ "$nacc" = "$nsp" ] && [ "$(grep -c '"spelling\.' "$out")" = "$nsp" ] ||
    { echo "$name: $nacc of $nsp unverified spellings accepted"; grep '"spelling\.' "$out"; fail=1; }
  grep '"step.ops"' "$out"
  grep -q '"macos": "not macOS' "$out" && grep -q "\"compile_entry\": \"-\[$entry " "$out" ||
    { echo "$name: macOS $4 should record the OS and the entry point $entry:"; grep '"macos"\|"compile_entry"' "$out"; fail=1; }
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
# the op step within a small compile budget: what does not fit is recorded "not probed"
# (never silently missing), and removing step.ops resumes with only those; the table
# ends as the unbudgeted run's
grep '"op\.\|"spelling\.' "$out" | sort >"$work/ops.full"
grep -v '"op\.\|"spelling\.\|"step.ops"' "$out" | sed 's/^  "compile_budget": [0-9]*,/  "compile_budget": 15,/' |
  awk 'NR > 1 { if ($0 == "}") sub(/,$/, "", prev); print prev } { prev = $0 } END { print prev }' >"$work/budget.json"
runs=0
while [ $runs -lt 8 ]; do
  runs=$((runs + 1))
  "$cli" doctor --probe --quick -o "$work/budget.json" --framework "$fake" >"$work/budget.log" 2>&1
  grep -q '"op\.[a-z0-9_]*": "not probed: the compile budget' "$work/budget.json" || break
  grep -v '"step.ops"' "$work/budget.json" | awk 'NR > 1 { if ($0 == "}") sub(/,$/, "", prev); print prev } { prev = $0 } END { print prev }' \
    >"$work/budget.next" && mv "$work/budget.next" "$work/budget.json"
done
grep '"op\.\|"spelling\.' "$work/budget.json" | sort >"$work/ops.budget"
[ $runs -ge 3 ] && [ $runs -lt 8 ] && cmp -s "$work/ops.full" "$work/ops.budget" ||
  { echo "budget: $runs runs of the op step within 15 compiles, the table differs:"; diff "$work/ops.full" "$work/ops.budget"; fail=1; }
echo "the op step within a budget of 15 compiles: $runs runs"
[ $fail = 0 ] && echo "probe_chips: all four chips recovered" || echo "probe_chips: FAILED"
exit $fail
