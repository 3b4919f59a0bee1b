#!/usr/bin/env bash
# Second call: the GPU tests of the new build, then base vs new on the issue's shapes beside
# GEMM f16 and Flash f16 (same points), ncu per-kernel times of the new build, sanitizers.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
export KILN_REQUIRE_GPU=1
for t in assign_tc gpu_agreement anneal; do
  timeout 200 ./tests/$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped' $OUT/test_$t.txt | head -5
done
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" ./bench.sh base new@128 new 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh base new 2>&1
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_fast.py $(echo $SH | tr ' ' '\n' | sed 's/$//') 10000,128,256,30 --npy /tmp/pts 2>&1
for s in 1000000,128,2048 1000000,768,4096; do
  IFS=, read n d k <<<"$s"
  for v in base new; do
    echo "NCU-SUMMARY $v $s"
    timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum ./bin-$v/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda > /tmp/ncu.csv 2>&1
    python3 ncusum.py < /tmp/ncu.csv | head -6
  done
done
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 ./tests/assign_tc --test-threads=1 > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -3 $OUT/san_$tool.txt
done
