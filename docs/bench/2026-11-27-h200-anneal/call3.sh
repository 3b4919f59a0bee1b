#!/usr/bin/env bash
# Call 3 (2026-11-27, issue 28): GPU tests of build v3 (base + the anchor norm loaded
# one tile ahead + the refinement's loads unrolled 4 deep), base (e5d0062) against v3
# interleaved on the same points (auto tile), the fast anchors on the three target
# shapes, ncu per-launch tc-kernel times (base, v3) and v3's warp stall reasons,
# then the four sanitizers on assign_tc while time is left.
cd "$(dirname "$0")"
set -o pipefail
for f in $(find . -name '*.gz'); do gunzip -f "$f"; done; chmod +x bin-*/apps tests-v3/* 2>/dev/null
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
export KILN_REQUIRE_GPU=1
for t in assign_tc anneal; do
  timeout 150 ./tests-v3/$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST v3 $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped' $OUT/test_$t.txt | head -8
done
unset KILN_REQUIRE_GPU
SH="1000000,768,4096 100000,768,1024 1000000,128,2048 100000,1536,1024 100000,384,1024 100000,4096,1024 50000,2048,256 10000,128,256"
SHAPES="$SH" REPS=3 ./bench.sh base v3 2>&1
PYTHONPATH=anchors/flash-kmeans timeout 120 python3 anchors/kmeans_fast.py 1000000,768,4096 100000,768,1024 1000000,128,2048 --npy /tmp/pts 2>&1
for s in 1000000,768,4096 100000,768,1024 1000000,128,2048; do
  IFS=, read n d k <<<"$s"
  for v in base v3; do
    echo "NCU-TC $v $s"
    timeout 60 ncu --clock-control none --csv -k regex:anneal_assign_tc --metrics gpu__time_duration.sum ./bin-$v/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda > /tmp/ncu.csv 2>&1
    python3 ncusum.py < /tmp/ncu.csv | head -3
  done
done
M="--section WarpStateStats --section SpeedOfLight --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio"
for s in 1000000,768,4096 1000000,128,2048; do
  IFS=, read n d k <<<"$s"
  echo "NCU-STALL v3 $s"
  timeout 60 ncu --clock-control none -k regex:anneal_assign_tc --launch-skip 2 --launch-count 1 $M ./bin-v3/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 4 --tol 0 --backend cuda > /tmp/ncu.txt 2>&1
  cat /tmp/ncu.txt >> $OUT/ncu_stalls.txt
  grep -E 'anneal_assign_tc|Duration|Issue Slots Busy|Warp Cycles Per Issued' /tmp/ncu.txt | head -5; grep -E 'issue_stalled' /tmp/ncu.txt | sort -k3 -g -r | head -6
done
for tool in memcheck racecheck initcheck synccheck; do
  if (( SECONDS > 340 )); then echo "SANITIZER $tool skipped (time)"; continue; fi
  KILN_REQUIRE_GPU=1 timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 ./tests-v3/assign_tc --test-threads=1 tc_matches_reference near_ties a_full_list > /tmp/san.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 /tmp/san.txt
done
echo "ELAPSED $SECONDS s"
