#!/usr/bin/env bash
# Third call: GPU tests of both builds (trim: epilogue trim; slim: + the 64-anchor tile for small d),
# then base / trim / slim on the issue's shapes beside GEMM f16 and Flash f16 (same points),
# slim forced to 64 at d = 384 and 768, ncu per-kernel times at 1M x 128 x 2048, sanitizers.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
export KILN_REQUIRE_GPU=1
for b in trim slim; do for t in assign_tc gpu_agreement anneal; do
  timeout 200 ./tests-$b/$t --test-threads=1 > /tmp/test.txt 2>&1; echo "TEST $b $t rc=$?"; grep -E 'test result|FAILED|panicked|skipped' /tmp/test.txt | head -5
done; done
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" ./bench.sh base trim slim 2>&1
SHAPES="100000,384,1024 100000,768,1024 50000,2048,256" ./bench.sh slim@64 slim@128 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh base trim slim 2>&1
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_fast.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
for v in trim slim; do
  echo "NCU-SUMMARY $v 1000000,128,2048"
  timeout 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum ./bin-$v/apps anneal --npy /tmp/pts/x_1000000_128.npy --m 2048 --iters 10 --tol 0 --backend cuda > /tmp/ncu.csv 2>&1
  python3 ncusum.py < /tmp/ncu.csv | head -4
done
timeout 100 ncu --clock-control none -k regex:anneal_assign_tc_slim --launch-skip 2 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy ./bin-slim/apps anneal --npy /tmp/pts/x_1000000_128.npy --m 2048 --iters 3 --tol 0 --backend cuda 2>&1 | grep -E 'Duration|Throughput|Issue Slots|Registers|Achieved Occupancy|Theoretical Occ'
for tool in memcheck racecheck initcheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 ./tests-slim/assign_tc --test-threads=1 > $OUT/san_$tool.txt 2>&1; echo "SANITIZER $tool rc=$?"; tail -2 $OUT/san_$tool.txt
done
