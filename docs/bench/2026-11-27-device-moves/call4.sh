#!/usr/bin/env bash
# issue 28, call 4: the GPU suite (Vulkan loader carried), then the whole anneal
# (maintenance, the start and the output buffer on/for the device) beside all five anchor modes.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-final && cp /tmp/gpu-bundle/bin/apps bin-final/apps
(cd /tmp/gpu-bundle && bash run.sh tests > $OUT/suite.log 2>&1; echo "SUITE rc=$?"; grep -E "^<== .*FAIL|gpu-bundle:" $OUT/suite.log; grep -E "the host's bits|listed: plain" $OUT/suite.log)
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=2 ./bench.sh final@auto 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh final@auto 2>&1
for s in 100000,4096,1024 100000,1536,1024 50000,2048,256 1000000,768,4096 100000,768,1024; do IFS=, read n d k <<<"$s"
  echo "STATS $s: $(KILN_ANNEAL_TC_STATS=1 ./bin-final/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda 2>&1 | grep '^tc:' | head -12 | sed 's/ of [0-9]* points//; s/ left to the list kernel//' | tr '\n' ' ')"
done
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_anchors.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
echo "ELAPSED $SECONDS s"
