#!/usr/bin/env bash
# First call: baseline figures, anchors on the same points, stats, ncu.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
./bench.sh base 2>&1
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_fast.py 10000,128,256 1000000,128,2048 100000,768,1024 1000000,768,4096 --npy /tmp/pts 2>&1
A=./bin-base/apps
for s in 1000000,128,2048 100000,768,1024 1000000,768,4096; do
  IFS=, read n d k <<<"$s"
  echo "STATS $s"; KILN_ANNEAL_TC_STATS=1 $A anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda 2>&1 | grep 'tc:' | awk '{print $6}' | tr '\n' ' '; echo
done 2>&1
python3 sim.py 100000,768,1024 1000000,768,4096 1000000,128,2048 2>&1
NCU="ncu --clock-control none"
for s in 1000000,128,2048 1000000,768,4096; do
  IFS=, read n d k <<<"$s"
  echo "NCU-SUMMARY $s (10 iterations, maintenance pass at 5)"
  timeout 150 $NCU --csv --metrics gpu__time_duration.sum $A anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda > $OUT/ncu_sum_${n}_${d}.csv 2>&1
  python3 ncusum.py < $OUT/ncu_sum_${n}_${d}.csv
done 2>&1
for s in 1000000,768,4096 1000000,128,2048; do
  IFS=, read n d k <<<"$s"
  timeout 120 $NCU -k regex:'anneal_assign_(tc|list)' --launch-skip 3 --launch-count 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats $A anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 3 --tol 0 --backend cuda > $OUT/ncu_detail_${n}_${d}.txt 2>&1
  grep -E 'anneal_assign|Duration|Throughput|Pipe|Issue Slots|Registers|Achieved Occupancy|Stall|Bank' $OUT/ncu_detail_${n}_${d}.txt | head -60
done
