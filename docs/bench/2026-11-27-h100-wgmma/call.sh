#!/usr/bin/env bash
# issue 28, 2026-11-27: the wgmma build's whole anneal beside all five anchor modes, same points, one call.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-final && cp /tmp/gpu-bundle/bin/apps bin-final/apps
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=2 ./bench.sh final@auto final@128 final@64 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh final@auto final@64 2>&1
for s in $SH; do IFS=, read n d k <<<"$s"
  echo "STATS $s: $(KILN_ANNEAL_TC_STATS=1 ./bin-final/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda 2>&1 | grep '^tc:' | head -12 | tr '\n' ';')"
done
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_anchors.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
