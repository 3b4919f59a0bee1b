#!/usr/bin/env bash
# issue 28, call 6: the GPU suite, then the whole anneal (the statistics' kernels now split d over
# grid.y) beside all five anchor modes, then ncu's per-kernel times of 3 iterations.
cd "$(dirname "$0")"
here=$PWD
set -o pipefail
exec > >(tee $OUT/log.txt) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
for f in ../../.gl/*.deb; do dpkg -x $f / ; done; ldconfig
tar xJf ../../target/gpu-bundle.tar.xz -C /tmp && mkdir -p bin-final && cp /tmp/gpu-bundle/bin/apps bin-final/apps
(cd /tmp/gpu-bundle && bash run.sh tests > $OUT/suite.log 2>&1; echo "SUITE rc=$?"; grep -E "^<== .*FAIL|gpu-bundle:" $OUT/suite.log; grep -E "the host's bits|listed: plain|identical" $OUT/suite.log)
SH="10000,128,256 1000000,128,2048 100000,384,1024 100000,768,1024 100000,1536,1024 1000000,768,4096 100000,4096,1024 50000,2048,256"
SHAPES="$SH" REPS=2 ./bench.sh final@auto 2>&1
SHAPES="10000,128,256" ITERS=30 REPS=3 ./bench.sh final@auto 2>&1
PYTHONPATH=../c4/anchors/flash-kmeans python3 ../c4/anchors/kmeans_anchors.py $SH 10000,128,256,30 --npy /tmp/pts 2>&1
for s in 50000,2048,256 100000,4096,1024 1000000,768,4096; do IFS=, read n d k <<<"$s"
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv ./bin-final/apps anneal --npy /tmp/pts/x_${n}_${d}.npy --m $k --iters 3 --tol 0 --backend cuda > /tmp/ncu.csv 2>/dev/null
  echo "NCU $s rc=$? (3 iterations; the sums over the run's launches)"
  python3 - /tmp/ncu.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value"); u = hdr.index("Metric Unit")
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    try: x = float(r[v].replace(",", "")) * scale[r[u]]
    except (ValueError, KeyError): continue
    name = r[k].split("(")[0][:60]; tot[name] += x; cnt[name] += 1
for name, t in sorted(tot.items(), key=lambda a: -a[1])[:10]:
    print(f"  {t:10.1f} us  {cnt[name]:3d}x  {name}")
PY
done
echo "ELAPSED $SECONDS s"
