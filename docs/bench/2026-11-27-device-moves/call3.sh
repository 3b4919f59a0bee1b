#!/usr/bin/env bash
# issue 28, call 3: the GPU suite, then the whole anneal with maintenance and the start on the device.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-final && cp /tmp/gpu-bundle/bin/apps bin-final/apps
(cd /tmp/gpu-bundle && bash run.sh tests > $OUT/suite.log 2>&1; echo "SUITE rc=$?"; grep -E "^<== |passed|failed" $OUT/suite.log | grep -v ": pass" | tail -15; grep -E "the host's bits|listed: plain" $OUT/suite.log)
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=2 ./bench.sh final@auto 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=2 ./bench.sh final@auto 2>&1
echo "ELAPSED $SECONDS s"
