#!/usr/bin/env bash
# Call 2 (2026-11-27, issue 28): GPU tests of the square-tile build (assign_tc, anneal
# with KILN_REQUIRE_GPU=1); base (e5d0062) against the new build (auto tile = as base,
# and the square tile: 64 x 64 warp tiles), interleaved on the same points; ncu warp
# stall reasons of the wide, square and slim kernels; memcheck and racecheck.
cd "$(dirname "$0")"
set -o pipefail
for f in $(find . -name '*.gz'); do gunzip -f "$f"; done; chmod +x bin-*/apps tests-sq/* 2>/dev/null
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
export KILN_REQUIRE_GPU=1
for t in assign_tc anneal; do
  timeout 150 ./tests-sq/$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST sq $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped' $OUT/test_$t.txt | head -8
done
unset KILN_REQUIRE_GPU
SH="1000000,768,4096 100000,768,1024 1000000,128,2048 100000,1536,1024 100000,384,1024 100000,4096,1024 50000,2048,256 10000,128,256"
SHAPES="$SH" REPS=2 ./bench.sh base sq sq@square 2>&1
S="--section WarpStateStats --section SchedulerStats --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
for v in sq@128,1000000,768,4096 sq@square,1000000,768,4096 sq@64,1000000,128,2048 sq@square,1000000,128,2048; do
  IFS=, read vt n d k <<<"$v"; b=${vt%@*}; tile=${vt#*@}
  echo "NCU $vt $n x $d x $k"
  KILN_ANNEAL_TC_TILE=$tile timeout 60 ncu --clock-control none -k regex:anneal_assign_tc --launch-skip 2 --launch-count 1 $S ./bin-$b/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 4 --tol 0 --backend cuda > /tmp/ncu.txt 2>&1
  cat /tmp/ncu.txt >> $OUT/ncu_all.txt
  grep -E 'anneal_assign_tc|Duration|L2 Hit|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued' /tmp/ncu.txt | head -9; grep -E 'issue_stalled' /tmp/ncu.txt | sort -k3 -g -r | head -7
done
for tool in memcheck racecheck; do
  KILN_REQUIRE_GPU=1 timeout 45 compute-sanitizer --tool $tool --error-exitcode 99 ./tests-sq/assign_tc --test-threads=1 columns_without tc_matches_reference > /tmp/san.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 /tmp/san.txt
done
