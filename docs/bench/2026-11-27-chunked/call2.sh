#!/usr/bin/env bash
# issue 28, call 2: the chunked wgmma build's whole anneal beside all five anchor modes, same points.
cd "$(dirname "$0")"
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
python3 - <<'PY'
import numpy as np, time
for mb in [3, 12, 16, 64]:
    n = mb * 2**20 // 4
    t0 = time.perf_counter(); a = np.empty(n, np.float32); a.fill(1); t1 = time.perf_counter()
    a.fill(2); t2 = time.perf_counter()
    print(f"PAGES {mb} MiB: first touch {1e3*(t1-t0):.2f} ms, second {1e3*(t2-t1):.2f} ms ({1e6*(t1-t0-(t2-t1))/(mb*256):.2f} us per 4K page)")
PY
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-final && cp /tmp/gpu-bundle/bin/apps bin-final/apps
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=2 ./bench.sh final@auto 2>&1
SHAPES="100000,1536,1024 100000,4096,1024 50000,2048,256" REPS=2 ./bench.sh final@wgmma 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh final@auto 2>&1
for s in 100000,1536,1024 100000,4096,1024 50000,2048,256 1000000,768,4096; do IFS=, read n d k <<<"$s"
  echo "STATS $s: $(KILN_ANNEAL_TC_STATS=1 ./bin-final/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 10 --tol 0 --backend cuda 2>&1 | grep '^tc:' | head -12 | tr '\n' ';')"
done
PYTHONPATH=anchors/flash-kmeans python3 anchors/kmeans_anchors.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
echo "ELAPSED $SECONDS s"
