#!/usr/bin/env bash
# Call 1 (2026-11-27, issue 28): GPU tests of the new build (assign_tc, anneal with
# KILN_REQUIRE_GPU=1); base (the branch point, e5d0062) against the new build (auto
# tile, and the broad 256-anchor kernel with 4 and 6 pipeline stages), interleaved on
# the same points; the fast anchors (GEMM f16, Flash f16) on the three target shapes;
# ncu of the wide and broad kernels at 1M x 768 x 4096; memcheck and racecheck.
cd "$(dirname "$0")"
set -o pipefail
for f in $(find . -name '*.gz'); do gunzip -f "$f"; done; chmod +x bin-*/apps tests-new/* 2>/dev/null
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
export KILN_REQUIRE_GPU=1
for t in assign_tc anneal; do
  timeout 150 ./tests-new/$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST new $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped' $OUT/test_$t.txt | head -8
done
unset KILN_REQUIRE_GPU
SH="1000000,768,4096 100000,768,1024 1000000,128,2048 100000,1536,1024 10000,128,256"
SHAPES="$SH" REPS=2 ./bench.sh base new new@256 new6@256 2>&1
PYTHONPATH=anchors/flash-kmeans timeout 150 python3 anchors/kmeans_fast.py 1000000,768,4096 100000,768,1024 1000000,128,2048 --npy /tmp/pts 2>&1
for v in new@128 new@256 new6@256; do
  b=${v%@*}; tile=${v#*@}
  echo "NCU $v 1M x 768 x 4096"
  KILN_ANNEAL_TC_TILE=$tile timeout 60 ncu --clock-control none -k regex:anneal_assign_tc --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis ./bin-$b/apps anneal --npy /tmp/pts/x_1000000_768.npy --m 4096 --iters 4 --tol 0 --backend cuda > $OUT/ncu_${v/@/_}.txt 2>&1
  grep -E 'anneal_assign_tc|Duration|Throughput|Hit Rate|Issue Slots|Executed Ipc A' $OUT/ncu_${v/@/_}.txt | head -14
done
for tool in memcheck racecheck; do
  KILN_REQUIRE_GPU=1 timeout 45 compute-sanitizer --tool $tool --error-exitcode 99 ./tests-new/assign_tc --test-threads=1 columns_without tc_matches_reference > /tmp/san.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 /tmp/san.txt
done
