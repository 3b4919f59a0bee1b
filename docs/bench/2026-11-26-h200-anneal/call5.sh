#!/usr/bin/env bash
# Final call: GPU tests of the final build, base vs final on the issue's shapes beside
# GEMM f16 and Flash f16 (same points, same call), ncu per-kernel times, sanitizers.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
export KILN_REQUIRE_GPU=1
for t in assign_tc gpu_agreement anneal; do
  timeout 200 ./tests-final/$t --test-threads=1 > $OUT/test_$t.txt 2>&1; echo "TEST final $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped' $OUT/test_$t.txt | head -5
done
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=3 ./bench.sh base final 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh base final 2>&1
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_fast.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
for s in 1000000,128,2048 1000000,768,4096 100000,4096,1024; do
  IFS=, read n d k <<<"$s"
  for v in base final; do
    echo "NCU-SUMMARY $v $s"
    timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum ./bin-$v/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda > /tmp/ncu.csv 2>&1
    python3 ncusum.py < /tmp/ncu.csv > /tmp/ncu.txt; head -5 /tmp/ncu.txt; tail -1 /tmp/ncu.txt
  done
done
for tool in memcheck racecheck initcheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 ./tests-final/assign_tc --test-threads=1 > /tmp/san.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 /tmp/san.txt
done
